r"""Your own Pyomo rule as a declared constraint block (issue 37).

A constraint added to ``explainer.milp`` directly is checked like any other
(:mod:`.raw`), but parallel workers rebuild the model from the explainer's arguments and
its declared blocks, so they cannot see it. :class:`CustomConstraint` declares the same
rule as a block: a function that builds it on the model, which travels to every worker
(cloudpickle carries lambdas and closures) and is checked on every returned point at
its raw values, as :mod:`.raw` checks the user's own components:

* ``rule(m, b)`` returns a relational expression, an iterable of them, or ``None``
  having added components to ``b`` itself; it may use the features (``m.x[f]``,
  ``m.onehot[f, level]``, ``m.x0``, ``m.onehot0``, ``m.category_changed``), their
  distances (``m.dev``, ``m.changed``, ``m.linf``: those the objective declares), the
  model's outputs (``m.predictor.outputs``) and variables of its own, declared on ``b``;
* ``cost(m, b)`` returns a linear expression added to the objective (the answer's
  objective and bound are of the objective with it); it may use what ``rule`` built.

A block with variables of its own is checked at the solver's values of them (a witness
that the point is a solution of the MILP with the rule), so only on a solver's point: a
heuristic point is then never taken for a point of the declared problem
(:meth:`~cfopt.ConstraintBlock.needs_witness`). Give such variables bounds: the speed
paths bound the cost from below by interval arithmetic
(:meth:`~cfopt.constraints.raw.RawProblem.distance_radius`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyomo.environ as pyo
from pyomo.core.expr.relational_expr import RelationalExpression

from .blocks import ConstraintBlock
from .raw import RowValues, check_variables, members, row_problems

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

Rule = Callable[[Any, pyo.Block], Any]


class CustomConstraint(ConstraintBlock):
    """A rule and/or a cost of your own, written in Pyomo (module docstring).

    Args:
        rule: ``rule(m, b)``: relational expression(s) on the model ``m``, or ``None``
            after adding components to the block ``b``.
        cost: ``cost(m, b)``: a linear expression added to the objective.
        name: block name (default ``custom``).
    """

    kind = "custom"

    def __init__(self, rule: Rule | None = None, *, cost: Rule | None = None,
                 name: str | None = None) -> None:
        super().__init__(name)
        if rule is None and cost is None:
            raise ValueError("a custom constraint needs a rule, a cost or both")
        for what, fn in (("rule", rule), ("cost", cost)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{what} must be a function (m, b) -> Pyomo expression, got "
                                f"{type(fn).__name__}")
        self.rule, self.cost_rule = rule, cost
        self._own = False

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        block.rules = pyo.ConstraintList()
        made = None if self.rule is None else self.rule(m, block)
        for expr in _relations(made, self.name):
            block.rules.add(expr)
        block.cost = pyo.Expression(expr=0 if self.cost_rule is None
                                    else self.cost_rule(m, block))
        own = [check_variables(m, data.body, f"custom constraint {self.name!r} ({name})",
                               block) for name, data in members(block)]
        own.append(check_variables(m, block.cost.expr, f"the cost of {self.name!r}", block))
        self._own = any(own)

    @property
    def needs_witness(self) -> bool:
        return self._own

    def objective_term(self, m: CounterfactualModel, block: pyo.Block) -> Any:
        return None if self.cost_rule is None else block.cost

    def cost(self, m: CounterfactualModel, factual: pd.Series, row: pd.Series) -> float:
        if self.cost_rule is None:
            return 0.0
        with RowValues(m, _frame(row)):
            value = pyo.value(m.component(self.name).cost, exception=False)
        if value is None:
            raise ValueError(f"the cost of {self.name!r} uses a variable of its own that has "
                             f"no value")
        return float(value)

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        return row_problems(m, _frame(row), members(m.component(self.name)),
                            f"custom constraint {self.name!r}:")


def _relations(made: Any, name: str | None) -> list[Any]:
    """The relational expressions a rule returned (none, one, or an iterable)."""
    if made is None:
        return []
    items = [made] if isinstance(made, (RelationalExpression, bool)) or not isinstance(
        made, Iterable) else list(made)
    for item in items:
        if not isinstance(item, RelationalExpression):
            raise TypeError(f"the rule of custom constraint {name!r} must return Pyomo "
                            f"relational expressions (a <= b, a >= b, a == b), got "
                            f"{type(item).__name__}")
    return items


def _frame(row: pd.Series) -> pd.DataFrame:
    """A raw row as the one-row frame :class:`RowValues` reads."""
    return pd.DataFrame([row.to_dict()], columns=list(row.index))
