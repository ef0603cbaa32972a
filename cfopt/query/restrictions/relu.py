r"""Per-query bound tightening around a heuristic counterfactual.

The big-M constants of a ReLU network are valid over the whole feature box, but the
optimal counterfactual lies close to the factual :math:`\hat x`. For one query:

1. **Incumbent** (:meth:`ReluRestriction.heuristic`): the cheapest verified point of
   the single-feature scans and the greedy walk on the float64 network
   (:mod:`cfopt.query.restrictions.relu_points`). Its objective value is :math:`r`.
2. **Region bounds** (:func:`radius_bounds`): every counterfactual at least as good
   satisfies :math:`\text{objective} \le r`. For an objective
   :math:`a\,\text{L1} + b\,\text{L0} + c\,\text{L∞}` plus costs of at least
   :math:`\underline t` (declared blocks', the user's term; :math:`r` is read as
   :math:`r - \underline t`), a changed feature costs at least
   :math:`b + (a + c) w_f |\Delta_f|`, so each moves by
   :math:`w_f |\Delta_f| \le (r - b)/(a + c)` at most, at most
   :math:`\lfloor r/b \rfloor` features change, and the weighted L1 spent is at most
   :math:`(r - b)/a` (:math:`r/a` if the factual could be its own answer)
   (:func:`radius_moves`). The first layer's pre-activation :math:`w^\top z + b` is
   bounded two ways, both exact for their relaxation: by a fractional knapsack over
   that L1 budget (items: coordinate moves within each feature's reach, cost
   :math:`w_f \cdot \text{scale}_f` per model-input unit, and affordable category
   switches, cost :math:`w_f`), and by the sum of the :math:`\lfloor r/b \rfloor`
   largest single-feature moves
   (:meth:`~cfopt.models.network.ReLUNetwork.sparse_bounds`); deeper layers by linear
   bounds back-substituted to the inputs and concretized over the same region, the
   better of that knapsack and those sparse moves (:func:`region_concretizer`,
   :meth:`~cfopt.models.network.ReLUNetwork.back_substituted`), within interval
   propagation; all intersected with the model's global bounds. A copy of the
   network at the factual with some inputs replaced (a K-scenario's) gets the second
   bound around its own base point.
3. The MILP is solved with these bounds (no row :math:`\text{objective} \le r`:
   parallel to the objective, it made solvers prove wrong optima). The bounds hold
   for every point of objective :math:`\le r` and are exact inside them, so that
   restricted problem has the same optimum as the original whenever the original
   optimum is :math:`\le r`; if it is infeasible or its optimum exceeds :math:`r`
   (the heuristic point broke a user constraint, or numerics), the original problem
   is solved instead. A solver bound on the restricted problem is then a valid bound
   on the original one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ...formulations.predictors import NetworkCopy, NetworkPredictorConstr
from ...models.network import Concretizer, ReLUNetwork
from ...space.encoding import CodeEncoder
from .registry import Restricted, Restriction, register_restriction
from .relu_points import SingleMove, greedy_counterfactual, single_moves

if TYPE_CHECKING:
    from ...problem import CounterfactualModel

#: the cheapest heuristic points :meth:`ReluRestriction.heuristic` checks against the
#: declared constraints (each check builds and validates a raw row)
HEURISTIC_TRIES = 8


def objective_value(m: CounterfactualModel, row: pd.DataFrame) -> float:
    """The MILP objective of a raw row: the distance, the declared blocks' costs and the
    term the user added to ``m.objective`` (:meth:`RawProblem.term_value
    <cfopt.constraints.raw.RawProblem.term_value>`, the user's own variables at the
    solver's values)."""
    extra = sum(c.cost(m, m.factual.iloc[0], row.iloc[0]) for c in m.constraints.values())
    return distance_value(m, row) + float(extra) + m.raw.term_value(m, row)


def distance_value(m: CounterfactualModel, row: pd.DataFrame) -> float:
    """The distance part of the MILP objective at a raw row (its norms' weighted sum)."""
    distances = m.distances(row)
    return float(sum(c * distances[k] for k, c in m.objective_terms.items()))


@dataclass(frozen=True)
class RadiusMoves:
    r"""What a counterfactual of objective ≤ ``radius`` can change (module docstring,
    step 2): per mutable feature, the positions of its model inputs and the points
    whose convex hull holds them when it changes (a numeric feature's inputs at its two
    reachable codes, a categorical's at each of its levels, as the input specs compute
    them: the space's scaling or a pipeline's preprocessing), the weighted move
    :math:`w_f |\Delta_f|` to each of those points, the least weighted move of a change
    of each (a category switch's or one raw unit of an integral feature: :math:`w_f`; a
    continuous feature's: 0), and the most features it changes."""

    moves: dict[str, tuple[np.ndarray, np.ndarray]]
    costs: dict[str, np.ndarray]
    least: dict[str, float]
    most: float
    budget: float  # weighted L1 a counterfactual can spend on its moves


def radius_moves(m: CounterfactualModel, radius: float,
                 support: Collection[str] | None = None) -> RadiusMoves:
    r"""The :class:`RadiusMoves` of the current query: a change of feature :math:`f`
    costs at least :math:`b + (a + c) w_f |\Delta_f|` for the objective
    :math:`a\,\text{L1} + b\,\text{L0} + c\,\text{L∞}` (the costs beyond it, at least
    :math:`\underline t`, leave a distance of :math:`r - \underline t`:
    :meth:`~cfopt.constraints.raw.RawProblem.distance_radius`), so it moves by
    :math:`w_f |\Delta_f| \le (r - b)/(a + c)` at most (an integral feature by whole
    raw units), a category switch is affordable only when
    :math:`b + (a + c) w_f \le r`; at most
    :math:`\lfloor r / b \rfloor` features change (and at most ``max_changes``); the L1
    spent is at most :math:`(r - b)/a` when the factual is not a counterfactual (one
    change at least), else :math:`r / a`.

    ``support``: only these features may change (the others held at the factual, a
    split solve of :mod:`cfopt.query.supports`), so at most ``len(support)`` do."""
    terms = m.objective_terms
    a, b, c = (terms.get(k, 0.0) for k in ("l1", "l0", "linf"))
    radius = m.raw.distance_radius(radius)  # the costs beyond the distance: at least this
    radius = radius * (1 + 1e-9) + 1e-12  # a point at the radius stays inside (rounding)
    space, weights = m.space, m.weights
    enc = CodeEncoder(space, m.input_specs)
    z0 = np.asarray(m.factual_inputs, dtype=float)  # pragma: no mutate (float64 already)
    codes0 = enc.codes(m.factual)
    spend = radius - (b if m.target and not m.is_target(m.factual_class) else 0.0)
    cap = (radius - b) / (a + c) if a + c > 0 else np.inf  # weighted move of one feature
    moves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    costs: dict[str, np.ndarray] = {}
    least: dict[str, float] = {}
    for f in space:
        if f.immutable or radius < b or (support is not None and f.name not in support):
            continue
        w, x0, at = weights[f.name], codes0[enc.index[f.name]], enc.positions(f.name)
        if f.is_onehot:
            if w <= cap:
                levels = np.arange(len(f.categories), dtype=float)  # pragma: no mutate (codes)
                moves[f.name] = (at, enc.inputs(z0, f.name, levels)[:, at])
                costs[f.name] = w * (levels != x0)
                least[f.name] = w
            continue
        reach = cap / w if w > 0 else np.inf  # in raw units
        if f.is_integral and np.isfinite(reach):  # whole raw units
            reach = np.floor(reach * (1 + 1e-9))
            if reach <= 0:
                continue
        up = x0 + min(f.upper - x0, reach) if f.direction != "decrease" else x0
        down = x0 - min(x0 - f.lower, reach) if f.direction != "increase" else x0
        ends = np.array([down, up])
        moves[f.name] = (at, enc.inputs(z0, f.name, ends)[:, at])
        costs[f.name] = w * np.abs(ends - x0)
        least[f.name] = w if f.is_integral else 0.0
    most = min(np.floor(radius / b) if b > 0 else np.inf, m.change_cap,
               np.inf if support is None else len(support))
    return RadiusMoves(moves, costs, least, most, spend / a if a > 0 else np.inf)


def radius_bounds(m: CounterfactualModel, radius: float, base: np.ndarray | None = None,
                  within: list[tuple[np.ndarray, np.ndarray]] | None = None,
                  support: Collection[str] | None = None, net: ReLUNetwork | None = None
                  ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pre-activation bounds valid for every counterfactual of objective ≤ ``radius``
    (module docstring), within ``within`` (default: the model's global bounds), that
    changes only features of ``support`` (default: any), of the model's network or of
    ``net`` on the same inputs (e.g. a shifted copy of it).

    ``base``: the model inputs a copy of the network sees when no feature changes (a
    K-scenario copy: the factual with the scenario's values), each changed feature's
    inputs being the counterfactual's own; then only the bound of the few moves
    (:meth:`~cfopt.models.network.ReLUNetwork.sparse_bounds`) applies. Default: the
    factual's, where the L1 knapsack bounds the first layer too."""
    net = m.adapter.structure if net is None else net
    reach = radius_moves(m, radius, support)
    within = m.global_layer_bounds if within is None else within
    z0 = np.asarray(m.factual_inputs, dtype=float)  # pragma: no mutate (float64 already)
    few = net.sparse_bounds(z0 if base is None else base, list(reach.moves.values()),
                            reach.most, within)
    if base is not None:
        return few
    concretize = region_concretizer(m, reach, z0)
    first = net.layers[0]
    least, most = concretize(first.weight)
    lo, hi = least + first.bias, most + first.bias
    widen = 1e-6 * (1.0 + np.maximum(np.abs(lo), np.abs(hi)))
    return net.back_substituted((lo - widen, hi + widen), concretize, within=few)


def region_concretizer(m: CounterfactualModel, reach: RadiusMoves, z0: np.ndarray
                       ) -> Concretizer:
    """The least and the greatest ``A z`` per row of ``A`` over the model inputs ``z`` of
    the counterfactuals within a radius (module docstring, step 2): ``A z0`` plus the
    best of a fractional knapsack over the weighted L1 budget (items: the move to each
    end of a numeric feature's reach, at its weighted cost; a category switch, at its
    weight, to the best level per row and side) and of the sum of the ``most`` largest
    single-feature moves; both relax the region, so each is sound."""
    def concretize(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        A = np.atleast_2d(np.asarray(A, dtype=float))  # pragma: no mutate (float64 weights)
        values: list[np.ndarray] = []  # per item: value of taking it fully, (2, rows)
        costs: list[float] = []
        gains, losses = [], []  # per feature: its best move up and down, per row
        for name, (at, options) in reach.moves.items():
            delta = A[:, at] @ (options - z0[at]).T  # (rows, points): the move to each
            gains.append(delta.max(axis=1).clip(min=0))
            losses.append((-delta).max(axis=1).clip(min=0))
            if m.space[name].is_onehot:  # one switch: the best level per row and side
                values.append(np.stack([gains[-1], losses[-1]]))
                costs.append(m.weights[name])
                continue
            for k, cost in enumerate(reach.costs[name]):
                if np.any(options[k] != z0[at]):
                    values.append(np.stack([delta[:, k].clip(min=0),
                                            (-delta[:, k]).clip(min=0)]))
                    costs.append(float(cost))
        gain = _knapsack(values, costs, reach.budget, len(A))
        if gains and reach.most >= 1:
            count = len(gains) if not np.isfinite(reach.most) else int(reach.most)
            # each row sorted (np.sort's default axis, the last)
            top = np.stack([-np.sort(-np.column_stack(g))[:, :count].sum(axis=1)
                            for g in (gains, losses)])
            gain = np.minimum(gain, top)
        else:  # no move (no gains: the knapsack has no item either), or none may be made
            gain = np.zeros_like(gain)
        base = A @ z0
        return base - gain[1], base + gain[0]

    return concretize


def _knapsack(values: list[np.ndarray], costs: list[float], budget: float,
              rows: int) -> np.ndarray:
    """(2, rows): the greatest total of the items' ``values`` (each (2, rows), taken
    fractionally) within ``budget`` of their ``costs``, per row and side."""
    if not values:
        return np.zeros((2, rows))
    V = np.stack(values, axis=2)  # (2, rows, items)
    C = np.broadcast_to(np.asarray(costs, dtype=float), V.shape)  # pragma: no mutate (floats)
    # a free item's ratio orders it among the free ones only, each taken whole for nothing
    # pragma: no mutate start (no 0 divisor; the ratio of free items only orders them)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(C > 0, V / np.where(C > 0, C, 1.0), np.inf)
    # pragma: no mutate end
    # pragma: no mutate start (worthless items last, in any order; axis 2: the default, last)
    ratio = np.where(V > 0, ratio, -1.0)
    order = np.argsort(-ratio, axis=2)
    Vs = np.take_along_axis(V, order, axis=2)
    Cs = np.take_along_axis(C, order, axis=2)
    # pragma: no mutate end
    spent = np.cumsum(Cs, axis=2) - Cs
    take = np.ones_like(Vs)  # a free item whole
    paid = Cs > 0
    take[paid] = np.clip((budget - spent[paid]) / Cs[paid], 0, 1)
    return (take * Vs).sum(axis=2)


# The restrictions tighten bounds only: they hold for every point of objective at most
# the heuristic's ``r`` and are exact inside them (the explainer falls back to the full
# problem when the optimum lies beyond ``r``). The row ``objective <= r`` they once added
# is left out: parallel to the objective, it made HiGHS and CBC prove wrong optima (HiGHS
# 0.39668 where 0.39658 is feasible; CBC 1.0 where 0.374 is; differential seeds 4791, 1025).
def network_copies(m: CounterfactualModel) -> list[NetworkCopy]:
    """The model's network in ``m`` and every copy of it the declared blocks add
    (:meth:`~cfopt.constraints.ConstraintBlock.network_copies`)."""
    return [(m.predictor_constr, None),
            *(c for block in m.constraints.values() for c in block.network_copies(m))]


def unstable_neurons(copies: Sequence[NetworkCopy], first: int = 0) -> int:
    """Hidden neurons of ``copies`` whose current bounds straddle 0 (each a binary of
    the big-M ReLU encoding), in the hidden layers from index ``first`` on."""
    return sum(int(((lo < 0) & (hi > 0)).sum()) for pred, _ in copies
               for lo, hi in pred.layer_bounds()[first:-1])


@contextlib.contextmanager
def copies_within_radius(m: CounterfactualModel, radius: float,
                         copies: Sequence[NetworkCopy],
                         support: Collection[str] | None = None,
                         details: dict[str, Any] | None = None) -> Iterator[None]:
    """Each network ``copies[i] = (predictor, base)`` bounded over the points of
    objective ≤ ``radius`` that change only features of ``support``
    (:func:`radius_bounds` with its own network and ``base``), within its current
    bounds, while entered; the current bounds are restored on exit. ``details``: the
    stable neurons of the first copy go into ``details["stable_neurons"]``."""
    saved = [pred.layer_bounds() for pred, _ in copies]
    try:
        for k, ((pred, base), current) in enumerate(zip(copies, saved)):
            stable = pred.set_layer_bounds(radius_bounds(
                m, radius, base=base, within=current, support=support,
                net=pred.adapter.structure))
            if k == 0 and details is not None:
                details["stable_neurons"] = stable
        yield
    finally:
        for (pred, _), current in zip(copies, saved):
            pred.set_layer_bounds(current)


class ReluRestriction(Restriction):
    """A ReLU network's layer bounds within the radius of a greedy counterfactual (module
    docstring), through the model's input specs (the space's own encoding or a
    pipeline's preprocessing); needs the model's global layer bounds."""

    by_radius = True

    def applies(self, m: CounterfactualModel) -> bool:
        return bool(m.global_layer_bounds)

    def heuristic(self, m: CounterfactualModel) -> pd.DataFrame | None:
        r"""The cheapest by distance of the points of :func:`~.relu_points.single_moves`
        (a change of one feature costs :math:`b + (a + c) w_f |\Delta_f|`, as in
        :func:`radius_moves`) and of :func:`~.relu_points.greedy_counterfactual` that
        the declared constraints admit (:meth:`CounterfactualModel.violations`; of the
        :data:`HEURISTIC_TRIES` cheapest), else the cheapest of them (the caller
        verifies it with the real model, or takes it as a guess); ``None`` without
        one."""
        terms = m.objective_terms
        a, b, c = (terms.get(k, 0.0) for k in ("l1", "l0", "linf"))
        walk = greedy_counterfactual(m)
        points: list[tuple[float, SingleMove | pd.DataFrame]] = [
            (b + (a + c) * move.move, move) for move in single_moves(m)]
        if walk is not None:
            points.append((distance_value(m, walk), walk))
        points.sort(key=lambda point: point[0])
        cheapest = None
        for _, point in points[:HEURISTIC_TRIES]:
            row = point if isinstance(point, pd.DataFrame) else point.row(m)
            if not m.violations(row):
                return row
            cheapest = row if cheapest is None else cheapest
        return cheapest

    def restrict(self, m: CounterfactualModel, candidate: pd.DataFrame | None, radius: float,
                 details: dict[str, Any], deadline: float, verified: bool) -> Restricted | None:
        if candidate is None:
            return None
        return Restricted(copies_within_radius(m, radius, network_copies(m), details=details))

    def within_radius(self, m: CounterfactualModel, radius: float, details: dict[str, Any],
                      support: Collection[str] | None = None, copies: Sequence[NetworkCopy] = ()
                      ) -> AbstractContextManager[None] | None:
        return copies_within_radius(m, radius, [*network_copies(m), *copies], support,
                                    details)


register_restriction(NetworkPredictorConstr, ReluRestriction())
