"""The counterfactual MILP's own pieces, one module per concern.

* :mod:`.features` — raw feature variables and their map to model inputs;
* :mod:`.predictors` — learned models as blocks (:func:`add_predictor`), one module per
  kind: ``network`` (ReLU networks), ``linear``, ``trees`` (a binary per split point,
  Mišić 2020), with :mod:`.tree_cuts` and :mod:`.tree_regions` (the per-query trees of
  large ensembles);
* :mod:`.bound_tightening` — the ReLU big-M constants tightened (OBBT) and set;
* :mod:`.validity` — the target class constraints;
* :mod:`.distances` — L1 / L0 / L∞ terms and change indicators;
* :mod:`.actionability` — immutable, monotone, max changes (from the feature space);
* :mod:`.robustness` — Δ-robustness under model shift: interval bounds, the exact
  linear adversary MILP, shifted network copies.

Declared constraints (rules, causal models, trust regions, diversity cuts, setbacks,
scenarios) are :mod:`cfopt.constraints`; the robust methods that solve these are
:mod:`cfopt.methods`.
"""

from .predictors import PredictorConstr, add_predictor, register_formulation

__all__ = ["add_predictor", "PredictorConstr", "register_formulation"]
