"""How one query is answered on the built problem.

* :mod:`.runner` — the engine of :class:`~cfopt.Explainer`: a query from its start to its
  answer (solves, verification, the claim, the diagnosis);
* :mod:`.solution` — from the solver's values to a raw counterfactual the real model verifies;
* :mod:`.claims` — what the answer may claim (its status), from the solves;
* :mod:`.diagnosis` — which constraint groups make a query infeasible;
* :mod:`.diverse` — diverse sets of counterfactuals of one query;
* :mod:`.restrictions` — exact per-query restrictions around a heuristic counterfactual.
"""
