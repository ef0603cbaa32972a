"""Exact per-query restrictions of the problem around a heuristic counterfactual, one
kind per predictor formulation.

* :mod:`.relu` — ReLU networks: layer bounds within the heuristic's radius;
* :mod:`.trees` — tree ensembles: leaves unreachable within the radius pruned, or the
  per-query trees of a large ensemble.

A restriction holds for every point of objective at most the heuristic's ``r`` and is
exact inside it (the explainer falls back to the full problem when the optimum lies
beyond ``r``). A new predictor kind adds its own with :func:`register_restriction`; the
explainer finds it by the class of the model's :class:`PredictorConstr`
(:func:`restriction_of`).
"""

from . import relu, trees  # noqa: F401  (each registers its restriction)
from .registry import Restricted, Restriction, register_restriction, restriction_of

__all__ = ["Restricted", "Restriction", "register_restriction", "restriction_of"]
