"""Counterfactuals for groups: the fewest actions that move a population, exact.

* :mod:`.actions` — an action (a change vector) and its exact check on every row;
* :mod:`.master` — the restricted master (set cover) and its bounds;
* :mod:`.pricing` — the action MILP: a model copy per row, on the same blocks;
* :mod:`.solve` — column generation, the greedy and the direct MILP;
* :mod:`.result` — :class:`GroupCounterfactuals`.

The entry point is :meth:`cfopt.Explainer.explain_group`.
"""

from .actions import Action
from .result import GroupCounterfactuals
from .solve import explain_group

__all__ = ["Action", "GroupCounterfactuals", "explain_group"]
