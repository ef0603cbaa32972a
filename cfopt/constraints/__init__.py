"""Declared constraints: Pyomo blocks a user adds to the counterfactual problem.

* :mod:`.blocks` — :class:`ConstraintBlock`, the base of every declared constraint
  (subclass it to add your own);
* :mod:`.rules` — linear constraints and conditional rules by feature names, steps;
* :mod:`.custom` — a rule and a cost of your own, written in Pyomo;
* :mod:`.raw` — the components added to the model directly, checked as declared ones;
* :mod:`.causal` — structural causal models (linear or learned equations);
* :mod:`.trust_regions` — ε-convex hull, k-nearest-neighbour hull, cluster hulls;
* :mod:`.isolation` — an isolation forest's outlier score at least a threshold;
* :mod:`.diversity_cuts` — no-good and distance cuts against earlier counterfactuals;
* :mod:`.setback` — robustness to input perturbations: the C-setback cost;
* :mod:`.scenarios` — the K-scenario master of K-robustness.
"""

from .blocks import ConstraintBlock
from .causal import CausalModel, StructuralEquation
from .custom import CustomConstraint
from .diversity_cuts import DiversityCuts
from .isolation import IsolationForestScore
from .rules import IfCategory, IfIncreases, LinearConstraint, Step
from .scenarios import KScenarios
from .setback import SetbackCost
from .trust_regions import ClusterHulls, ConvexHull, NearestNeighbourHull

__all__ = [
    "CausalModel", "ClusterHulls", "ConstraintBlock", "ConvexHull", "CustomConstraint",
    "DiversityCuts",
    "IfCategory", "IfIncreases", "IsolationForestScore", "KScenarios", "LinearConstraint",
    "NearestNeighbourHull", "SetbackCost", "Step", "StructuralEquation",
]
