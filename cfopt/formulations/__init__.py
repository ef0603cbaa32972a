"""Pyomo blocks, one module per concern: where to look to add a constraint.

* :mod:`.features` — raw feature variables and their map to model inputs;
* :mod:`.predictors` — learned models as blocks (:func:`add_predictor`);
* :mod:`.trees` — the leaf-indicator formulation of tree ensembles;
* :mod:`.validity` — the target class constraints;
* :mod:`.distances` — L1 / L0 / L∞ terms and change indicators;
* :mod:`.actionability` — immutable, monotone, max changes.
"""

from . import trees  # noqa: F401  (registers the tree-ensemble formulation)
from .predictors import PredictorConstr, add_predictor, register_formulation

__all__ = ["PredictorConstr", "add_predictor", "register_formulation"]
