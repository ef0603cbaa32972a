"""Pyomo blocks, one module per concern: where to look to add a constraint.

* :mod:`.features` — raw feature variables and their map to model inputs;
* :mod:`.predictors` — learned models as blocks (:func:`add_predictor`);
* :mod:`.trees` — tree ensembles (a binary per split point, Mišić 2020);
* :mod:`.validity` — the target class constraints;
* :mod:`.distances` — L1 / L0 / L∞ terms and change indicators;
* :mod:`.actionability` — immutable, monotone, max changes (from the feature space);
* :mod:`.blocks` — :class:`ConstraintBlock`, the base of every declared constraint
  (subclass it to add your own);
* :mod:`.rules` — linear constraints and conditional rules by feature names, steps;
* :mod:`.causal` — structural causal models (linear or learned equations);
* :mod:`.trust_regions` — ε-convex hull, k-nearest-neighbour hull, cluster hulls;
* :mod:`.isolation` — an isolation forest's outlier score at least a threshold;
* :mod:`.diversity` — no-good and distance cuts against earlier counterfactuals;
* :mod:`.robustness` — Δ-robustness under model shift: interval bounds, the exact
  linear adversary MILP, shifted network copies;
* :mod:`.perturbations` — robustness to input perturbations: the C-setback cost and
  the K-scenario master.

The robust methods that solve these (adversaries, loops, PROPLACE's plausible region)
are in :mod:`cfopt.methods`.
"""

from . import trees  # noqa: F401  (registers the tree-ensemble formulation)
from .blocks import ConstraintBlock
from .causal import CausalModel, StructuralEquation
from .diversity import DiversityCuts
from .isolation import IsolationForestScore
from .perturbations import KScenarios, SetbackCost
from .predictors import PredictorConstr, add_predictor, register_formulation
from .rules import IfCategory, IfIncreases, LinearConstraint, Step
from .trust_regions import ClusterHulls, ConvexHull, NearestNeighbourHull

__all__ = [
    "add_predictor", "CausalModel", "ClusterHulls", "ConstraintBlock", "ConvexHull",
    "DiversityCuts", "IfCategory", "IfIncreases", "LinearConstraint", "NearestNeighbourHull",
    "PredictorConstr", "register_formulation", "Step", "StructuralEquation",
]
__all__ += ["KScenarios", "SetbackCost"]
__all__ += ["IsolationForestScore"]
