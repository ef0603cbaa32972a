"""Exact per-query restrictions of the problem around a heuristic counterfactual.

* :mod:`.relu` — ReLU networks: layer bounds within the heuristic's radius;
* :mod:`.trees` — tree ensembles: leaves unreachable within the radius pruned, or the
  per-query trees of a large ensemble.
"""
