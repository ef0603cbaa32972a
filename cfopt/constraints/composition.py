"""The part of the counterfactual MILP a user composes on cfopt's formulation: declared
constraint blocks (:class:`~cfopt.ConstraintBlock`), components added to the model
directly (:mod:`.raw`), and the objective they make together.

``m.objective`` is the distance (:mod:`cfopt.formulations.distances`) plus every
declared block's cost (:meth:`~cfopt.ConstraintBlock.objective_term`) — the *composed*
objective — plus whatever the user added to it. ``m.objective_cutoff`` keeps
``m.objective <= m.cutoff`` (a mutable Param at :attr:`Composition.max_objective`, an
upper bound of the objective over the variables' bounds, unless a diverse set's ε window
lowers it). The bound is taken at the factual's parameters and taken again whenever the
factual changes (:meth:`Composition.bound_objective`): a term that reads the factual
(``m.x0``, ``m.category_changed``) has another range for each factual, and a bound of
another factual's would cut points of this query (differential seed 140953: a reward for
changing a category, bounded before any factual was set, cut every counterfactual).
"""

from __future__ import annotations

from typing import Any

import pyomo.environ as pyo
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr

from .blocks import ConstraintBlock
from .raw import RawProblem, raw_problem


class Composition(pyo.ConcreteModel):
    """A Pyomo model whose formulation is cfopt's and on which a user composes (module
    docstring). A subclass declares its formulation, its objective
    (:meth:`add_objective`), closes the formulation (:meth:`close_formulation`), and
    provides ``space``, ``factual`` and ``target``."""

    def add_objective(self, distance: Any) -> None:
        """Declare ``m.objective``, minimising ``distance``, with its cutoff row."""
        self._expressions(distance=distance, composed=distance, cutoff_of=distance,
                          bounded=distance)
        self.objective = pyo.Objective(expr=distance, sense=pyo.minimize)
        self.cutoff = pyo.Param(mutable=True, initialize=0.0)
        self.objective_cutoff = pyo.Constraint(expr=distance <= self.cutoff)
        self.bound_objective()

    def bound_objective(self) -> None:
        """:attr:`max_objective` anew: 1 + the upper bound of the cutoff row's objective
        (the user's, or cfopt's when the user's has none) over the variables' bounds, at
        the parameters' current values (the factual's); the cutoff is reset to it."""
        self._max_objective = float(compute_bounds_on_expr(self._bounded)[1]) + 1.0
        self.cutoff = self._max_objective

    def close_formulation(self) -> None:
        """Every top-level component declared so far is cfopt's formulation; later ones
        are declared blocks, a method's (:meth:`adopt`) or the user's own."""
        self._builtin_components = {c.local_name for c in self.component_objects(
            descend_into=False)}
        self._constraints: dict[str, ConstraintBlock] = {}
        self._raw, self._raw_key = RawProblem(), ()

    @property
    def max_objective(self) -> float:
        """An upper bound on the objective over the variables' bounds (the inactive
        cutoff)."""
        return self._max_objective

    @property
    def constraints(self) -> dict[str, ConstraintBlock]:
        """The declared constraint blocks by name."""
        return dict(self._constraints)

    def add_constraint(self, constraint: ConstraintBlock) -> pyo.Block:
        """Add a declared constraint as the sub-block ``m.<constraint.name>`` (a unique
        name is chosen when it has none); it applies to every later query."""
        if not isinstance(constraint, ConstraintBlock):
            raise TypeError(f"constraints must be cfopt constraint blocks (LinearConstraint, "
                            f"IfIncreases, CausalModel, ConvexHull, ...), got "
                            f"{type(constraint).__name__}")
        constraint.validate(self.space)
        name = constraint.name
        if name is None:
            k = 1
            while self.component(f"{constraint.kind}_{k}") is not None:
                k += 1
            name = constraint.name = f"{constraint.kind}_{k}"
        if self.component(name) is not None:
            raise ValueError(f"a component named {name!r} already exists in the model; "
                             f"give the constraint another name")
        block = pyo.Block()
        self.add_component(name, block)
        constraint.build(self, block)
        self._constraints[name] = constraint
        if self.factual is not None and self.target:
            constraint.update(self, block)
        self._refresh_objective()
        return block

    def remove_constraint(self, name: str) -> ConstraintBlock:
        """Remove the declared constraint block ``name``; returns it."""
        if name not in self._constraints:
            raise KeyError(f"no declared constraint named {name!r}; the model has "
                           f"{sorted(self._constraints)}")
        self.del_component(name)
        removed = self._constraints.pop(name)
        self._refresh_objective()
        return removed

    def _refresh_objective(self) -> None:
        """Objective = the distance + every declared block's cost term
        (:meth:`ConstraintBlock.objective_term`) + the term the user added to it (kept
        as it stands); the cutoff follows it."""
        had_term = self.objective.expr is not self._composed
        user = self.objective.expr - self._composed
        extra = self.declared_costs()
        self._expressions(composed=self._distance + sum(extra) if extra else self._distance)
        self.objective.set_value(self._composed + user if had_term else self._composed)
        self.refresh_raw()

    @property
    def composed_objective(self) -> Any:
        """cfopt's objective: the distance plus the declared blocks' costs
        (``m.objective`` less the term the user added to it)."""
        return self._composed

    def declared_costs(self) -> list[Any]:
        """The declared blocks' objective terms."""
        return [t for name, c in self._constraints.items()
                if (t := c.objective_term(self, self.component(name))) is not None]

    @property
    def raw(self) -> RawProblem:
        """The components the user added to the model directly, as read at this
        query's start (:func:`~cfopt.constraints.raw.raw_problem`), or anew when
        components were added or removed or the objective changed since."""
        if self._raw_key != self._raw_state():
            self.refresh_raw()
        return self._raw

    def _raw_state(self) -> tuple:
        return (id(self.objective.expr), *(id(c) for c in self.user_components()))

    def refresh_raw(self) -> RawProblem:
        """Read the user's raw components and objective term anew (raises ``ValueError``
        naming one that cannot be checked on a raw point); the objective's cutoff row
        follows the user's objective (cfopt's, when the user's has no finite upper bound
        over the variables' bounds)."""
        self._raw, self._raw_key = raw_problem(self), self._raw_state()
        expr = self.objective.expr
        if self._cutoff_of is not expr:
            if compute_bounds_on_expr(expr)[1] is None:
                expr = self._composed
            self._expressions(cutoff_of=self.objective.expr, bounded=expr)
            self.bound_objective()
            self.objective_cutoff.set_value(expr <= self.cutoff)
        return self._raw

    def _expressions(self, **named: Any) -> None:
        """Keep expressions as plain attributes ``_<name>`` (the L∞ objective alone is
        the Var ``m.linf``, which Pyomo would take for a component)."""
        for name, expr in named.items():
            object.__setattr__(self, f"_{name}", expr)

    def is_own_component(self, name: str) -> bool:
        """Whether the top-level component ``name`` is cfopt's (its formulation's, a
        method's, or a declared block)."""
        return name in self._builtin_components or name in self._constraints

    def adopt(self, *names: str) -> None:
        """Count the top-level components ``names`` as cfopt's own: a method's additions
        to the model (a shifted copy, an adversary's objective), which no answer is
        checked against (:mod:`cfopt.constraints.raw`)."""
        self._builtin_components |= set(names)

    def user_components(self) -> list[pyo.Component]:
        """Active constraint components and blocks added after construction (declared
        constraint blocks included)."""
        return [c for c in self.component_objects((pyo.Constraint, pyo.Block),
                                                  descend_into=False, active=True)
                if c.local_name not in self._builtin_components]
