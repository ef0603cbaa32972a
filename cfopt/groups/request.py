"""A group query's request, checked whole before any solve (bad input names its culprit)."""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..constraints.blocks import ConstraintBlock
from ..constraints.raw import raw_components
from ..formulations.validity import check_target, target_indices
from ..space.feature import plain
from .actions import GroupRows
from .declared import DeclaredConstraints

METHODS = ("column_generation", "greedy", "direct_milp")
#: explainer → (its declared blocks, a copy built with a cap on changed features and
#: them): each row's own query
_CAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
OBJECTIVES = ("count", "coverage", "cost")


@dataclass
class GroupRequest:
    """What :func:`~cfopt.groups.solve.explain_group` works from: the validated rows
    (``X``, positions 0..n-1; ``X_raw`` as given), the target labels and indices, the
    rows already in the target (position → reason), the explainer's MILP and a capped
    explainer for each row's own counterfactual, and the options."""

    X: pd.DataFrame
    X_raw: pd.DataFrame
    target: tuple
    target_indices: list[int]
    already_target: dict[int, str]
    milp: Any
    capped: Any
    space: Any
    adapter: Any
    margin: float
    weights: dict[str, float]
    objective_is_l1: bool
    max_changes: int
    objective: str
    n_actions: int | None
    max_cost: float | None
    method: str
    time_limit: float | None
    row_time_limit: float | None
    max_iterations: int
    declared: DeclaredConstraints | None = None

    def rows(self, positions: Sequence[int]) -> GroupRows:
        """The rows at ``positions`` of ``X`` as a :class:`~cfopt.groups.actions.GroupRows`
        with the request's target, margin, weights, caps and declared constraints."""
        return GroupRows(self.space, self.adapter, self.milp.input_specs,
                         self.X.iloc[list(positions)], self.target, self.margin,
                         self.weights, self.max_changes, self.max_cost, self.declared)


def _positive_number(name: str, value: Any, *, allow_zero: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {kind} finite number or None, got {value!r}")
    return float(value)


def _count(name: str, value: Any, *, low: int = 1, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or \
            (high is not None and value > high):
        top = "" if high is None else f" and at most {high}"
        raise ValueError(f"{name} must be an integer of at least {low}{top}, got {value!r}")
    return int(value)


def check_group_request(explainer: Any, X: pd.DataFrame, target: Any, *, max_changes: Any,
                        objective: Any, n_actions: Any, max_cost: Any, method: Any,
                        time_limit: Any, row_time_limit: Any, max_iterations: Any
                        ) -> GroupRequest:
    """Every check of a group query, before any solve: the rows (a non-empty DataFrame
    the space accepts), the options, the explainer (a MILP solver, a classifier), the
    target (one class for every row when it is "the opposite"), and the declared and
    raw constraints a group can hold (:class:`~cfopt.groups.declared.DeclaredConstraints`)."""
    if not isinstance(X, pd.DataFrame):
        raise TypeError(f"X must be a pandas DataFrame of the group's rows, got "
                        f"{type(X).__name__}")
    if len(X) == 0:
        raise ValueError("X has no rows: a group needs at least one")
    if not X.index.is_unique:
        raise ValueError("X's index has duplicate labels; each row needs its own")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    space = explainer.space
    max_changes = _count("max_changes", max_changes, high=len(space))
    if n_actions is not None:
        n_actions = _count("n_actions", n_actions)
    if objective in ("coverage", "cost") and n_actions is None:
        what = "covers the most rows" if objective == "coverage" else \
            "moves the most rows at the least total cost"
        raise ValueError(f"objective={objective!r} {what} with at most n_actions "
                         "actions: give n_actions")
    if objective in ("coverage", "cost") and method == "direct_milp":
        raise ValueError("method='direct_milp' minimises the number of actions; use "
                         "objective='count' or method='column_generation'")
    if objective == "count" and n_actions is not None and method != "direct_milp":
        raise ValueError("n_actions is the budget of objective='coverage' (or the direct "
                         "MILP's slots); objective='count' finds the fewest itself")
    max_cost = _positive_number("max_cost", max_cost, allow_zero=True)
    time_limit = _positive_number("time_limit", time_limit)
    row_time_limit = _positive_number("row_time_limit", row_time_limit)
    max_iterations = _count("max_iterations", max_iterations)
    milp = explainer.milp
    if explainer.runner.cpsat:
        raise ValueError("group counterfactuals solve MILPs; build the explainer with "
                         "solver='highs' (or another MILP solver), not 'cpsat'")
    if milp.adapter.is_regressor:
        raise ValueError("group counterfactuals are defined for classifiers; this model is "
                         "a regressor")
    rows = space.validate(X)
    check_target(milp.adapter, target)
    classes = milp.predict(rows)
    labels, already = _target(milp.adapter, target, rows, classes)
    blocks = [c for c in milp.constraints.values() if not c.per_query]
    moving = [k for k in range(len(rows)) if k not in already]
    declared = None
    if moving and (blocks or raw_components(milp)):
        declared = DeclaredConstraints(milp, labels, rows.iloc[[moving[0]]])
    capped = explainer if milp.capped else _capped(explainer, blocks)
    terms = milp.objective_terms
    return GroupRequest(
        X=rows.reset_index(drop=True), X_raw=X, target=labels,
        target_indices=[milp.adapter.class_index(t) for t in labels],
        already_target=already, milp=milp, capped=capped, space=space,
        adapter=milp.adapter, margin=milp.declared_margin, weights=dict(milp.weights),
        objective_is_l1=set(terms) == {"l1"}, max_changes=max_changes,
        objective=objective, n_actions=n_actions, max_cost=max_cost, method=method,
        time_limit=time_limit, row_time_limit=row_time_limit,
        max_iterations=max_iterations, declared=declared)


def _capped(explainer: Any, blocks: list[ConstraintBlock]) -> Any:
    """A copy of ``explainer`` built with a cap on changed features (a query sets its
    own) and copies of its declared ``blocks``, for each row's own counterfactual; built
    once per explainer and set of blocks. (Constraints added by hand are not in it: a
    row it proves without any action has none with them either.)"""
    key = tuple((type(c).__qualname__, c.name, id(c)) for c in blocks)
    cached = _CAPPED.get(explainer)
    if cached is not None and cached[0] == key:
        return cached[1]
    capped = type(explainer)(
        **{**explainer.build_arguments, "max_changes": len(explainer.space)},
        solver=explainer.backend.name, threads=explainer.settings.threads,
        seed=explainer.settings.seed, solver_options=explainer.settings.options,
        verbose=explainer.settings.verbose, constraints=copy.deepcopy(blocks))
    _CAPPED[explainer] = (key, capped)
    return capped


def _target(adapter: Any, target: Any, rows: pd.DataFrame, classes: np.ndarray
            ) -> tuple[tuple, dict[int, str]]:
    """The target labels and the rows already in them. "The opposite" (``None``) needs
    every row in one class; a row in another class is named."""
    if target is None or (isinstance(target, str) and target == "opposite"
                          and "opposite" not in adapter.classes):
        first = plain(classes[0])
        others = [k for k, c in enumerate(classes) if plain(c) != first]
        if others:
            k = others[0]
            raise ValueError(f"target='opposite' needs every row of the group in one class; "
                             f"row {rows.index[k]!r} is classified {plain(classes[k])!r}, "
                             f"row {rows.index[0]!r} {first!r}: give the target class")
        indices = target_indices(adapter, target, first)
    else:
        labels = tuple(target) if isinstance(target, (list, tuple)) else (target,)
        indices = [adapter.class_index(t) for t in dict.fromkeys(labels)]
    labels = tuple(adapter.classes[i] for i in indices)
    already = {k: "already target" for k, c in enumerate(classes) if plain(c) in labels}
    return labels, already
