"""Branch-and-price (cfopt.groups.branching) against brute force on set-cover instances.

The pricing side is exact enumeration: an "action" is a set of rows it covers, and the
pricing returns the best subset of one set for the duals under the node's Ryan–Foster
pairs. The fewest sets covering every row is found by enumerating combinations.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from cfopt.groups.branching import BranchAndPrice, Node, Priced
from cfopt.groups.master import CoverMaster


class SetPricer:
    """Exact pricing over explicit sets (each set an action)."""

    def __init__(self, sets: list[frozenset], n: int) -> None:
        self.sets, self.n, self.calls = sets, n, 0

    def mask(self, rows) -> np.ndarray:
        m = np.zeros(self.n, dtype=bool)
        m[list(rows)] = True
        return m

    def price(self, prices, together, apart):
        self.calls += 1
        best = (0.0, None, np.zeros(self.n, dtype=bool))
        node = Node(0.0, 0, tuple(together), tuple(apart))
        for a, s in enumerate(self.sets):
            for k in range(1, len(s) + 1):
                for sub in itertools.combinations(sorted(s), k):
                    m = self.mask(sub)
                    if node.allows(m) and prices[m].sum() > best[0]:
                        best = (float(prices[m].sum()), a, m)
        return Priced(best[1], best[2], best[0], best[0])

    def covers(self, action: int) -> np.ndarray:
        return self.mask(self.sets[action])

    def key(self, action: int) -> int:
        return action


def fewest(sets, n: int) -> int:
    for k in range(1, n + 1):
        for combo in itertools.combinations(sets, k):
            if set().union(*combo) >= set(range(n)):
                return k
    raise AssertionError


def greedy(sets, n: int) -> list[int]:
    left, chosen = set(range(n)), []
    while left:
        a = max(range(len(sets)), key=lambda j: len(sets[j] & left))
        chosen.append(a)
        left -= sets[a]
    return chosen


def lp_bound(sets, n: int) -> float:
    master = CoverMaster(n, "count")
    for s in sets:
        master.add(np.isin(np.arange(n), list(s)))
    return master.solve_lp().value


def run(sets, n, start, incumbent, root_bound, left=lambda: None):
    """Branch-and-price from the sets ``start`` with the sets ``incumbent`` as best."""
    pricer = SetPricer(sets, n)
    tree = BranchAndPrice(np.ones(n, dtype=bool), pricer, start,
                          [pricer.covers(a) for a in start],
                          [start.index(a) for a in incumbent], root_bound, left)
    return tree.run(), pricer


#: the edges of K4 as rows, the four vertex stars as sets: every edge in two stars, no
#: two stars disjoint. The LP covers with four halves (2); three stars are needed.
K4_STARS = [frozenset({0, 1, 2}), frozenset({0, 3, 4}), frozenset({1, 3, 5}),
            frozenset({2, 4, 5})]


def test_a_gap_the_lp_leaves_is_closed_by_branching():
    assert lp_bound(K4_STARS, 6) == pytest.approx(2.0)
    assert fewest(K4_STARS, 6) == 3
    # an incumbent of 4 (every star), the root bound 2: the tree must find 3 and prove it
    result, pricer = run(K4_STARS, 6, [0, 1, 2, 3], [0, 1, 2, 3], 2.0)
    assert (len(result.actions), result.bound, result.proven) == (3, 3, True)
    assert result.nodes > 1  # the root LP is fractional: it had to branch
    covered = set().union(*(K4_STARS[a] for a in result.actions))
    assert covered == set(range(6))


def test_a_root_that_proves_it_needs_no_branching():
    sets = [frozenset({0, 1, 2}), frozenset({3, 4}), frozenset({0, 3})]
    result, _ = run(sets, 5, [0, 1, 2], [0, 1, 2], 1.0)
    assert (len(result.actions), result.bound, result.proven, result.nodes) == (2, 2, True, 1)


@pytest.mark.parametrize("seed", range(12))
def test_random_covers_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 8))
    m = int(rng.integers(4, 9))
    sets = [frozenset(np.flatnonzero(rng.random(n) < 0.4).tolist()) for _ in range(m)]
    sets = [s for s in sets if s] + [frozenset({i}) for i in range(n)]
    start = [int(a) for a in rng.choice(len(sets), size=3, replace=False)]
    start = sorted(set(start) | set(greedy(sets, n)))
    incumbent = greedy(sets, n)
    result, _ = run(sets, n, start, incumbent, 1.0)
    assert result.proven
    assert len(result.actions) == result.bound == fewest(sets, n)
    assert set().union(*(sets[a] for a in result.actions)) == set(range(n))


def vertex_cover(seed: int) -> tuple[list[frozenset], int]:
    """A random dense graph's edges as rows and its vertex stars as sets: the fewest
    stars is its vertex cover, whose LP is often half the vertices (a gap)."""
    rng = np.random.default_rng(seed)
    vertices = int(rng.integers(5, 7))
    edges = [e for e in itertools.combinations(range(vertices), 2) if rng.random() < 0.75]
    sets = [frozenset(j for j, e in enumerate(edges) if v in e) for v in range(vertices)]
    return [s for s in sets if s], len(edges)


#: seeds whose LP bound's ceiling is below the fewest stars (checked in the test)
GAPS = [0, 2, 3, 4, 7, 8, 19, 20, 40, 43]


@pytest.mark.parametrize("seed", GAPS)
def test_vertex_covers_with_a_gap_are_proven_by_branching(seed):
    sets, n = vertex_cover(seed)
    optimum = fewest(sets, n)
    assert math.ceil(lp_bound(sets, n) - 1e-6) < optimum  # the root alone cannot prove it
    everything = list(range(len(sets)))
    result, _ = run(sets, n, everything, everything, 1.0)
    assert result.proven and result.nodes > 1
    assert len(result.actions) == result.bound == optimum
    assert set().union(*(sets[a] for a in result.actions)) == set(range(n))


def test_rows_out_of_reach_are_not_asked_for():
    pricer = SetPricer(K4_STARS, 7)  # a seventh row no set covers
    active = np.array([True] * 6 + [False])
    tree = BranchAndPrice(active, pricer, [0, 1, 2, 3], [pricer.covers(a) for a in range(4)],
                          [0, 1, 2, 3], 1.0, lambda: None)
    result = tree.run()
    assert result.proven and len(result.actions) == 3 and result.bound == 3


def test_time_up_keeps_the_incumbent_and_an_honest_bound():
    result, pricer = run(K4_STARS, 6, [0, 1, 2, 3], [0, 1, 2, 3], 2.0, left=lambda: 0.0)
    assert (len(result.actions), result.bound, result.proven) == (4, 2, False)
    assert "time limit" in result.note and pricer.calls == 0


def test_a_pricing_that_stops_keeps_the_bound():
    class Stopping(SetPricer):
        def price(self, prices, together, apart):
            return None if self.calls >= 2 else super().price(prices, together, apart)

    pricer = Stopping(K4_STARS, 6)
    tree = BranchAndPrice(np.ones(6, dtype=bool), pricer, [0, 1, 2, 3],
                          [pricer.covers(a) for a in range(4)], [0, 1, 2, 3], 2.0,
                          lambda: None)
    result = tree.run()
    assert not result.proven and result.bound == 2 and len(result.actions) >= 3


def test_node_pairs_and_repair():
    node = Node(0.0, 0, together=((0, 1),), apart=((2, 3),))
    assert node.allows(np.array([1, 1, 1, 0], dtype=bool))
    assert not node.allows(np.array([1, 0, 0, 0], dtype=bool))
    assert not node.allows(np.array([0, 0, 1, 1], dtype=bool))
    repaired = node.repair(np.array([1, 0, 1, 0], dtype=bool))
    assert repaired.tolist() == [False, False, True, False]
    chained = Node(0.0, 0, together=((0, 1), (1, 2)))
    assert chained.repair(np.array([1, 1, 0], dtype=bool)).tolist() == [False] * 3


def test_the_partition_master_has_free_duals():
    master = CoverMaster(3, "count", partition=True)
    master.add(np.array([1, 1, 1], dtype=bool))
    master.add(np.array([1, 0, 0], dtype=bool))
    lp = master.solve_lp()
    assert lp.value == pytest.approx(1.0) and lp.objective_value == pytest.approx(1.0)
    assert lp.prices.sum() == pytest.approx(1.0)
    # with the full column forbidden, rows 1 and 2 pay their artificial price n + 1 = 4
    lp = master.solve_lp(np.array([False, True]))
    assert lp.objective_value == pytest.approx(1 + 2 * 4)
    assert sorted(lp.uncovered) == [1, 2]
    with pytest.raises(ValueError, match="partition form"):
        CoverMaster(3, "coverage", budget=1, partition=True)


def test_a_poor_start_is_priced_out_not_taken_for_a_bound():
    # only the singletons to start: the restricted LP (6) is no bound until priced
    sets = K4_STARS + [frozenset({i}) for i in range(6)]
    singles = list(range(4, 10))
    result, _ = run(sets, 6, singles, singles, 1.0)
    assert (len(result.actions), result.bound, result.proven) == (3, 3, True)


@pytest.mark.parametrize("seed,kind", [(2, "net"), (3, "rf")])
def test_the_pricing_milp_keeps_a_nodes_pairs_like_brute_force(seed, kind):
    from cfopt.groups.actions import GroupRows
    from cfopt.groups.pricing import ActionModel
    from cfopt.groups.request import check_group_request
    from cfopt.solvers.backends import make_solver
    from cfopt.solvers.base import SolverSettings
    from tests.test_groups import brute_covers, group

    explainer, space, scores, rows = group(seed, kind)
    sets = brute_covers(space, scores, rows, {1}, 2)
    req = check_group_request(explainer, rows, None, max_changes=2, objective="count",
                              n_actions=None, max_cost=None, method="column_generation",
                              time_limit=None, row_time_limit=30.0, max_iterations=500)
    grid = GroupRows(req.space, req.adapter, req.milp.input_specs, req.X, req.target,
                     req.margin, req.weights, 2, None)
    n = len(rows)
    model = ActionModel(grid, req.milp, req.target_indices, range(n))
    backend = make_solver("highs")
    rng = np.random.default_rng(seed)
    for _ in range(3):
        prices = rng.uniform(-0.6, 1.0, n)
        r, s, t, u = (int(v) for v in rng.choice(n, size=4, replace=False))
        node = Node(0.0, 0, together=((r, s),), apart=((t, u),))
        model.set_prices(dict(enumerate(prices)), node.together, node.apart)
        outcome = backend.solve(model.model, SolverSettings(mip_gap=0.0, threads=1))
        best = 0.0
        for cover in sets:
            for k in range(1, len(cover) + 1):
                for sub in itertools.combinations(sorted(cover), k):
                    mask = np.isin(np.arange(n), sub)
                    if node.allows(mask):
                        best = max(best, float(prices[mask].sum()))
        assert outcome.objective == pytest.approx(best, abs=1e-6)
        assigned = model.assigned()
        assert node.allows(assigned)
        assert not (assigned & ~grid.covers(model.action())[0]).any()


@pytest.mark.parametrize("seed,kind", [(2, "net"), (4, "net")])
def test_branch_and_price_on_a_real_model_from_a_poor_start(seed, kind):
    """The real pricing side from every row's own counterfactual as the incumbent and a
    root bound of 1: the tree alone must reach the brute-force optimum and prove it."""
    import time

    from cfopt.groups.actions import GroupRows
    from cfopt.groups.pricing import ActionModel
    from cfopt.groups.request import check_group_request
    from cfopt.groups.solve import ActionPricer, GroupSearch
    from cfopt.solvers.backends import make_solver
    from tests.test_groups import brute_covers, group

    explainer, space, scores, rows = group(seed, kind)
    sets = brute_covers(space, scores, rows, {1}, 2)
    coverable = set().union(*sets)
    req = check_group_request(explainer, rows, None, max_changes=2, objective="count",
                              n_actions=None, max_cost=None, method="column_generation",
                              time_limit=None, row_time_limit=30.0, max_iterations=500)
    search = GroupSearch(explainer, req, time.perf_counter())
    search.first_columns(list(range(len(rows))))
    grid = GroupRows(req.space, req.adapter, req.milp.input_specs, req.X, req.target,
                     req.margin, req.weights, 2, None)
    model = ActionModel(grid, req.milp, req.target_indices, range(len(rows)))
    pricer = ActionPricer(search, model, make_solver("highs"), grid)
    actions = list(search.first.values())
    active = np.isin(np.arange(len(rows)), sorted(coverable))
    tree = BranchAndPrice(active, pricer, actions, [pricer.covers(a) for a in actions],
                          list(range(len(actions))), 1.0, search.left)
    result = tree.run()
    from tests.test_groups import fewest as fewest_sets

    assert result.proven and len(result.actions) == result.bound == fewest_sets(sets, coverable)
    moved = np.zeros(len(rows), dtype=bool)
    for a in result.actions:
        moved |= grid.covers(a)[0]
    assert set(np.flatnonzero(moved)) == coverable
