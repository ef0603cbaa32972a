r"""Causal constraints: structural equations between features (CE-OCL eq. 7;
Karimi et al. 2021).

For an endogenous feature :math:`i` with parents :math:`p_i` and structural function
:math:`c_i`, a counterfactual must move :math:`x_i` with its parents:

.. math:: x_i = \hat x_i + c_i(x_{p_i}) - c_i(\hat x_{p_i})

so an action on a parent propagates to the child (and the child cannot move on its
own). :math:`c_i` is linear, :math:`c_i(p) = \sum_j a_j p_j` (given coefficients), or a
learned regressor on the parents' raw codes (any supported regressor: MLP, tree
ensemble, linear), embedded as a predictor block with its inputs tied to the parents'
variables; :math:`c_i(\hat x_{p_i})` is the real model's prediction at the factual (a
mutable Param, set per query). Equations may chain (a parent may be endogenous).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ..formulations.predictors import add_predictor
from ..models import parse_model
from ..space.space import FeatureSpace
from .blocks import ConstraintBlock, check_features, code_change

if TYPE_CHECKING:
    from ..problem import CounterfactualModel


class StructuralEquation:
    """``child = child̂ + c(parents) - c(parentŝ)``; ``c`` linear (``coefficients``:
    parent → coefficient) or a fitted regressor ``model`` on the parents' raw codes (in
    ``parents`` order)."""

    def __init__(self, child: str, parents: Sequence[str], *,
                 coefficients: Mapping[str, float] | None = None, model: Any = None) -> None:
        if isinstance(parents, str):
            parents = [parents]
        if not parents:
            raise ValueError(f"the equation of {child!r} needs at least one parent")
        if (coefficients is None) == (model is None):
            raise ValueError(f"the equation of {child!r} needs exactly one of coefficients= "
                             f"(linear) or model= (a fitted regressor)")
        self.child, self.parents = child, list(parents)
        self.coefficients = None
        self.adapter = None
        if coefficients is not None:
            extra = sorted(set(coefficients) - set(self.parents))
            missing = sorted(set(self.parents) - set(coefficients))
            if extra or missing:
                raise ValueError(f"the equation of {child!r}: coefficients must name exactly "
                                 f"its parents (missing {missing}, extra {extra})")
            self.coefficients = {p: float(coefficients[p]) for p in self.parents}
        else:
            self.adapter = parse_model(model)
            if not self.adapter.is_regressor:
                raise ValueError(f"the equation of {child!r} needs a regressor, got the "
                                 f"classifier {self.adapter.kind}")
            if self.adapter.n_inputs != len(self.parents):
                raise ValueError(f"the equation of {child!r}: the {self.adapter.kind} takes "
                                 f"{self.adapter.n_inputs} inputs but {len(self.parents)} "
                                 f"parents are given")

    def effect(self, space: FeatureSpace, row: pd.Series) -> float:
        """:math:`c(x_p)` at a raw row (the real model's prediction when learned)."""
        codes = np.array([[space[p].to_code(row[p]) for p in self.parents]])
        if self.coefficients is not None:
            return float(codes[0] @ np.array(list(self.coefficients.values())))
        return float(self.adapter.predict(codes)[0])


class CausalModel(ConstraintBlock):
    """A structural causal model: one :class:`StructuralEquation` per endogenous
    feature, declared once and enforced on every query."""

    kind = "causal"
    check_reads_query = False

    def __init__(self, equations: Sequence[StructuralEquation], *,
                 name: str | None = None) -> None:
        super().__init__(name)
        equations = list(equations)
        children = [e.child for e in equations]
        if len(set(children)) != len(children):
            raise ValueError(f"each feature has at most one structural equation; got "
                             f"{children}")
        self.equations = equations
        _check_acyclic(equations)

    def validate(self, space: FeatureSpace) -> None:
        for e in self.equations:
            check_features(space, [e.child, *e.parents], f"equation of {e.child!r}",
                           numeric=True)
            if space[e.child].is_integral:
                raise ValueError(f"equation of {e.child!r}: the child must be continuous "
                                 f"(an integer child rarely meets the equation exactly)")

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        space = m.space
        names = [e.child for e in self.equations]
        # pragma: no mutate start (insertion order either way; update sets effect0 per query)
        block.EQUATIONS = pyo.Set(initialize=names, ordered=True)
        block.effect0 = pyo.Param(block.EQUATIONS, mutable=True, initialize=0.0)
        # pragma: no mutate end
        effects: dict[str, Any] = {}
        for e in self.equations:
            if e.coefficients is not None:
                effects[e.child] = sum(a * m.x[p] for p, a in e.coefficients.items())
                continue
            # pragma: no mutate start (add_predictor reads the same box from the inputs)
            bounds = [(space[p].lower, space[p].upper) for p in e.parents]
            # pragma: no mutate end
            grids = [(0.0, 1.0) if space[p].is_integral else None for p in e.parents]
            predictor = add_predictor(block, e.adapter, [m.x[p] for p in e.parents],
                                      name=f"model_{e.child}", input_bounds=bounds,
                                      input_grids=grids)
            effects[e.child] = predictor.outputs[0]
        block.equation = pyo.Constraint(block.EQUATIONS, rule=lambda b, i: m.x[i] == m.x0[i]
                                        + effects[i] - b.effect0[i])

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        factual = m.factual.iloc[0]
        for e in self.equations:
            block.effect0[e.child] = e.effect(m.space, factual)

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        problems = []
        space = m.space
        for e in self.equations:
            expected = e.effect(space, row) - e.effect(space, factual)
            moved = code_change(space, e.child, factual, row)
            f = space[e.child]
            tolerance = 1e-5 * max(1.0, f.upper - f.lower)
            if abs(moved - expected) > tolerance:  # pragma: no mutate (>=: the tolerance's edge)
                problems.append(f"causal equation of {e.child!r}: it changed by {moved:g}, "
                                f"its parents imply {expected:g}")
        return problems


def _check_acyclic(equations: list[StructuralEquation]) -> None:
    parents = {e.child: set(e.parents) for e in equations}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 1:
            raise ValueError(f"the causal graph has a cycle: {' -> '.join(path + [node])}")
        if state.get(node) == 2:  # pragma: no mutate (a memo: a revisit finds the same)
            return
        if node not in parents:
            return
        state[node] = 1
        for p in parents[node]:
            visit(p, path + [node])
        state[node] = 2  # pragma: no mutate (the memo, as above)

    for child in parents:
        visit(child, [])


__all__ = ["CausalModel", "StructuralEquation"]
