r"""Every action, when there are few: the group problem as an explicit set cover.

When every movable numeric feature is integral, the actions with at most ``max_changes``
features are finitely many: per numeric feature every integer shift of
:meth:`~cfopt.groups.actions.GroupRows.shift_range` but 0, per categorical feature each
level, over every set of at most ``max_changes`` features. When their number times the
rows is at most :data:`ENUMERATION_LIMIT`, each one's cover set is computed by the exact
check (:meth:`~cfopt.groups.actions.GroupRows.covers_many`: the real model's ``predict``
and the margin), in chunks, and the master over *all* of them
(:class:`~cfopt.groups.master.CoverMaster`) is the whole problem of Lodi &
Ramírez-Ayerbe (2024, arXiv 2402.09473, §3): its integer optimum, proven by HiGHS, is the
optimum over every action, and a row no action covers is proven out of reach. Column
generation's pricing MILPs are the way when the actions are too many (a continuous
feature, wide ranges, many changes); even then, the actions on the features of fewest
options are enumerated the same way (:func:`partial_grid`) and enter its master at once,
and the pricing is left the actions changing another feature
(:func:`enumerated_columns`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .actions import Action, GroupRows
from .master import CoverMaster
from .result import GroupCounterfactuals

#: the most (action, row) checks the enumeration makes; beyond, column generation
ENUMERATION_LIMIT = 4_000_000
#: (action, row) checks per call of the model
CHUNK = 200_000


def feature_options(rows: GroupRows) -> dict[str, list[tuple[str, object]] | None]:
    """Per movable feature every change an action may make to it (module docstring):
    ``("level", l)`` per level of a categorical, ``("shift", d)`` per nonzero integer
    shift of an integral numeric; ``None`` for a continuous one (too many)."""
    options: dict[str, list[tuple[str, object]] | None] = {}
    for f in rows.space:
        if f.immutable:
            continue
        if f.is_onehot:
            options[f.name] = [("level", level) for level in f.categories]
            continue
        low, high = rows.shift_range(f.name)
        if (low, high) == (0.0, 0.0):
            continue
        options[f.name] = None if not f.is_integral else [
            ("shift", float(d)) for d in range(math.ceil(low), math.floor(high) + 1) if d != 0]
    return options


def _combos(names: list[str], max_changes: int) -> list[tuple[str, ...]]:
    return [c for k in range(1, max_changes + 1) for c in itertools.combinations(names, k)]


def _count(options: dict, names: list[str], max_changes: int) -> int:
    """The actions changing only features of ``names``."""
    return sum(math.prod(len(options[n]) for n in c) for c in _combos(names, max_changes))


def _grid(options: dict, names: list[str], max_changes: int) -> list[Action]:
    actions = []
    for combo in _combos(names, max_changes):
        for choice in itertools.product(*(options[n] for n in combo)):
            shifts = {n: v for n, (kind, v) in zip(combo, choice) if kind == "shift"}
            levels = {n: v for n, (kind, v) in zip(combo, choice) if kind == "level"}
            actions.append(Action(shifts, levels))
    return actions


def action_grid(rows: GroupRows, max_changes: int) -> list[Action] | None:
    """Every admissible action (module docstring), or ``None`` when a movable numeric
    feature is continuous or there are more than :data:`ENUMERATION_LIMIT` checks."""
    options = feature_options(rows)
    names = list(options)
    if any(options[n] is None for n in names) or \
            _count(options, names, max_changes) * rows.n > ENUMERATION_LIMIT:
        return None
    return _grid(options, names, max_changes)


def partial_grid(rows: GroupRows, max_changes: int) -> tuple[list[Action], list[str]]:
    """The actions on the movable features of fewest options only — the features taken
    in that order while every action on them checked on every row stays within
    :data:`ENUMERATION_LIMIT` checks — and the features left out (continuous ones, wide
    integer ranges): every other action changes one of those."""
    options = feature_options(rows)
    order = sorted(options, key=lambda n: (options[n] is None,
                                           len(options[n] or ()), n))
    few: list[str] = []
    for name in order:
        if options[name] is None or \
                _count(options, few + [name], max_changes) * rows.n > ENUMERATION_LIMIT:
            break
        few.append(name)
    return _grid(options, few, max_changes), [n for n in order if n not in few]


def cover_sets(rows: GroupRows, actions: list[Action],
               left: Callable[[], float | None]) -> tuple[list[np.ndarray], list[Action]] | None:
    """The distinct non-empty cover sets of ``actions`` (each with the action of least
    total cost over it), or ``None`` when the time ran out first."""
    per_chunk = max(1, CHUNK // max(rows.n, 1))
    best: dict[bytes, tuple[float, int, np.ndarray]] = {}
    for start in range(0, len(actions), per_chunk):
        remaining = left()
        if remaining is not None and remaining <= 0:
            return None
        chunk = actions[start:start + per_chunk]
        ok, costs, _ = rows.covers_many(chunk)
        for k in np.flatnonzero(ok.any(axis=1)):
            mask = ok[k]
            total = float(costs[k][mask].sum())
            key = mask.tobytes()
            if key not in best or total < best[key][0]:
                best[key] = (total, start + int(k), mask)
    kept = sorted(best.values(), key=lambda t: t[1])
    return [mask for _, _, mask in kept], [actions[a] for _, a, _ in kept]


def solve_enumerated(search: Any, candidates: list[int]) -> GroupCounterfactuals | None:
    """The group query of ``search`` (a :class:`~cfopt.groups.solve.GroupSearch`, count
    or coverage) over every action, or ``None`` when the actions are too many or the
    time ran out while checking them (column generation then goes on)."""
    req = search.request
    everyone = req.rows(candidates)
    actions = action_grid(everyone, req.max_changes)
    if actions is None:
        return None
    found = cover_sets(everyone, actions, search.left)
    if found is None:
        return None
    masks, kept = found
    reach = np.any(masks, axis=0) if masks else np.zeros(len(candidates), dtype=bool)
    for j, i in enumerate(candidates):
        if not reach[j]:
            search.reasons[i] = "no action (proven)"
    members = [i for j, i in enumerate(candidates) if reach[j]]
    search.reachable = set(members)
    search.notes.append(f"each of the {len(actions)} actions checked on every row "
                        f"({len(masks)} distinct cover sets; no pricing)")
    if not members:
        return search.finish([], members=[], value=0.0, bound=0.0, proven=True)
    rows = req.rows(members)
    master = CoverMaster(rows.n, req.objective, req.n_actions)
    for mask in masks:
        master.add(mask[reach])
    search.column_actions = list(kept)
    left = search.left()
    ip = master.solve_integer(None if left is None else max(left, 1.0))
    chosen = [kept[a] for a in sorted(ip.chosen)]
    if req.objective == "count":
        value = float(len(chosen))
        bound = value if ip.optimal else math.ceil(ip.bound - 1e-6)
    else:
        value = float(rows.n - len(ip.uncovered))
        bound = value if ip.optimal else math.floor(ip.bound + 1e-6)
    if not ip.optimal:
        search.notes.append("the integer master hit the time limit")
    return search.finish(chosen, members, value=value, bound=bound, proven=ip.optimal,
                         rows=rows, uncovered=ip.uncovered)


def enumerated_columns(search: Any, master: CoverMaster, rows: GroupRows, model: Any,
                       seen: set) -> None:
    r"""Column generation's first columns besides the rows' own (for ``search``, a
    :class:`~cfopt.groups.solve.GroupSearch`): every action on the features of fewest
    options (:func:`partial_grid`), checked on every row, enters the master at once, and
    the pricing MILP is left only the actions that change another feature
    (:meth:`~cfopt.groups.pricing.ActionModel.require_change`). Its bound :math:`P` still
    bounds every action where the master's bounds use it: an action in the master has a
    reduced cost of at least 0 at the LP's optimum (:math:`\sum_i \pi_i A_{ia} \le 1`,
    or :math:`\le \nu`), and Farley's bound takes :math:`\max(1, P)`, the coverage's
    :math:`\max(\nu, P)`. Nothing is done when the time is up before they are checked."""
    actions, wide = partial_grid(rows, search.request.max_changes)
    found = cover_sets(rows, actions, search.left) if actions else None
    if found is None:
        return
    for mask, action in zip(*found):
        if action.key() not in seen:
            seen.add(action.key())
            master.add(mask)
            search.column_actions.append(action)
    model.require_change(wide)
    search.notes.append(f"{len(actions)} actions changing none of "
                        f"{', '.join(wide) or 'the features'} checked on every row")
