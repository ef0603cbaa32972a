"""The K-adversary (:mod:`cfopt.methods.adversaries.k_neighbourhood`) on a linear model
by hand over two perturbed integer features and a categorical one: the box it searches
(kept features within their annotations, changed ones fixed), its verdicts and bounds,
the order of the margins it tries, the loop's step and its scenarios."""

from __future__ import annotations

import copy
import dataclasses
import logging
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import LinearRegression
from sklearn.tree import DecisionTreeClassifier

from cfopt import Perturbation
from cfopt.methods.adversaries import k_neighbourhood as kn
from cfopt.results.robust import KVerdict
from cfopt.results.status import Status
from cfopt.solvers import SolverSettings, make_solver
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

SHIFT = Perturbation.absolute(increase=1, decrease=1)


def space_of(b=SHIFT, c=Perturbation.to_categories("q")) -> FeatureSpace:
    return FeatureSpace([
        Feature("a", "integer", lower=0, upper=6, shift=0, scale=6, spread=6,
                perturbation=SHIFT),
        Feature("b", "integer", lower=0, upper=6, shift=0, scale=6, spread=6, perturbation=b),
        Feature("c", "categorical", categories=("p", "q", "r"), perturbation=c)])


def linear(space, q=-0.5, r=0.0) -> torch.nn.Sequential:
    """logit = z_a + z_b / 2 + q [c = q] + r [c = r] - 1 on z = v / 6."""
    slices = space.input_slices()
    layer = torch.nn.Linear(space.n_inputs, 1)
    with torch.no_grad():
        layer.weight.zero_()
        layer.weight[0, slices["a"].start] = 1.0
        layer.weight[0, slices["b"].start] = 0.5
        layer.weight[0, slices["c"].start + 1] = q
        layer.weight[0, slices["c"].start + 2] = r
        layer.bias.fill_(-1.0)
    return torch.nn.Sequential(layer)


def row(a, b, c):
    return pd.DataFrame({"a": [a], "b": [b], "c": [c]})


def adversary(space=None, settings=None, **net):
    space = space or space_of()
    return kn.KAdversary(linear(space, **net), space, make_solver("highs"),
                         settings or SolverSettings(), tolerance=1e-6)


X = row(0, 3, "p")


def test_a_kept_feature_and_category_give_the_counterexample():
    verdict = adversary().check(X, row(6, 3, "p"), 1)
    assert verdict.robust is False and verdict.predicted == 0
    assert verdict.point.iloc[0].to_dict() == {"a": 6, "b": 2, "c": "q"}
    assert verdict.value == pytest.approx(1 + 2 / 12 - 0.5 - 1, abs=1e-6)
    assert verdict.bound == pytest.approx(verdict.value, abs=1e-6)
    assert verdict.status is Status.OPTIMAL and verdict.time > 0


def test_a_robust_point_has_its_least_margin_as_bound():
    verdict = adversary(q=0.0).check(X, row(6, 3, "p"), 1)
    assert verdict.robust is True and verdict.bound == pytest.approx(1 / 6, abs=1e-6)
    assert verdict.point.iloc[0]["b"] == 2 and verdict.predicted == 1


def test_changed_features_stay_put():
    # a, b and c all changed (p -> r): nothing moves
    verdict = adversary().check(X, row(6, 4, "r"), 1)
    assert verdict.robust is True and verdict.bound == pytest.approx(1 / 3, abs=1e-6)
    assert verdict.point.iloc[0].to_dict() == {"a": 6, "b": 4, "c": "r"}


def test_a_kept_feature_without_annotation_stays_put():
    verdict = adversary(space_of(b=None, c=None)).check(X, row(6, 3, "p"), 1)
    assert verdict.robust is True and verdict.bound == pytest.approx(1 / 4, abs=1e-6)


def test_a_kept_feature_moves_within_its_bounds():
    x = row(6, 6, "p")  # class 1; the counterfactual 0 keeps b = 6, which may fall to 5
    verdict = adversary().check(x, row(0, 6, "p"), 0)
    assert verdict.robust is True
    assert verdict.bound == pytest.approx(-(0 + 6 / 12 - 1), abs=1e-6)  # b stays at 6
    assert verdict.point.iloc[0]["b"] == 6
    verdict = adversary().check(row(6, 1, "r"), row(0, 1, "r"), 0)  # b in [0, 2]
    assert verdict.bound == pytest.approx(-(2 / 12 - 1), abs=1e-6)


def test_no_time_is_undecided():
    verdict = adversary().check(X, row(6, 3, "p"), 1, SolverSettings(time_limit=1e-12))
    assert verdict.robust is None and verdict.bound is None and verdict.point is None
    assert verdict.status is Status.NO_SOLUTION


def test_the_adversary_frees_actionability_but_not_the_callers_space():
    space = space_of()
    space.immutable("a").increase_only("b")
    kept = copy.deepcopy(space)
    adv = adversary(space)
    assert [(f.immutable, f.direction) for f in adv.m.space] == [(False, "any")] * 3
    assert [(f.immutable, f.direction) for f in space] == \
        [(f.immutable, f.direction) for f in kept]
    assert adv.tolerance == 1e-6 and adv.m.objective.active is False
    assert adv.m.adversary_objective.active and adv.m.objective_cutoff.active is False


def test_a_regressor_is_refused():
    space = space_of()
    model = LinearRegression().fit(np.eye(space.n_inputs), np.arange(space.n_inputs))
    with pytest.raises(ValueError, match="K-robustness is defined for classifiers"):
        kn.KAdversary(model, space, make_solver("highs"), SolverSettings())


def test_the_strongest_other_class_first():
    adv = object.__new__(kn.KAdversary)
    adapter = SimpleNamespace(decision="argmax", n_logits=4, class_index=lambda t: t,
                              output=lambda Z: np.array([[0.0, 3.0, 1.0, 2.0]]))
    adv.m = SimpleNamespace(adapter=adapter)
    assert adv._pairs(0, np.zeros(2)) == [{0: 1.0, 1: -1.0}, {0: 1.0, 3: -1.0},
                                          {0: 1.0, 2: -1.0}]
    assert adv._pairs(2) == [{2: 1.0, 0: -1.0}, {2: 1.0, 1: -1.0}, {2: 1.0, 3: -1.0}]
    adapter.decision = "sign"
    assert adv._pairs(1) == [{0: 1.0}] and adv._pairs(0) == [{0: -1.0}]


# ------------------------------------------------------------------ the loop's step
def verdict(point=None, robust=False, bound=-0.5):
    return KVerdict(robust=robust, bound=bound, value=bound, point=point, predicted=0,
                    status=Status.OPTIMAL, time=0.0)


def test_the_scenario_is_the_kept_features_the_point_moves():
    factual, z = X.iloc[0], row(6, 3, "p").iloc[0]
    assert kn.scenario(factual, z, verdict(row(6, 2, "q"))) == {"b": 2, "c": "q"}
    assert kn.scenario(factual, z, verdict(row(5, 3, "p"))) is None  # a was changed
    assert kn.scenario(factual, z, verdict(None)) is None
    assert kn.scenario(factual, row(6, 4, "p").iloc[0], verdict(row(6, 2, "q"))) == \
        {"c": "q"}


def test_the_step_checks_the_candidate_and_its_cut_is_a_scenario():
    seen, added = [], []
    answer_point = row(6, 3, "p")
    found = verdict(row(6, 2, "q"))
    search = SimpleNamespace(check=lambda x, z, label, settings: seen.append(
        (x, z, label, settings)) or found)
    scenarios = SimpleNamespace(add_scenario=lambda m, s, box: added.append((m, s, box)))
    m = SimpleNamespace(factual=X)
    step = kn.KNeighbourhoodAdversary(search, scenarios, m, "box")
    deadline = SimpleNamespace(left=lambda: "settings")
    check = step.check(SimpleNamespace(point=answer_point, label=1), deadline)
    assert seen == [(X, answer_point, 1, "settings")]
    assert check.certified is False and check.bound == -0.5 and check.verdict is found
    assert check.counterexample == {"b": 2, "c": "q"}
    assert check.note == ("the K-adversary neither proved robustness nor found a "
                          "counterexample (status optimal, bound -0.5)")
    step.add_cut(check)
    assert added == [(m, {"b": 2, "c": "q"}, "box")]
    found = verdict(None, robust=True, bound=0.25)
    assert step.check(SimpleNamespace(point=answer_point, label=1), deadline).certified


# ------------------------------------------------------ labelled levels (ordinals)
def ordinal_tree():
    """A tree on an integer ``a`` and an ordinal ``o`` (lo < mid < hi, which may switch
    to hi): class 0 exactly at o = mid."""
    space = FeatureSpace([
        Feature("a", "integer", lower=0, upper=3),
        Feature("o", "ordinal", categories=("lo", "mid", "hi"),
                perturbation=Perturbation.to_categories("hi"))])
    X = np.array([[a, o] for a in range(4) for o in range(3)], float)
    return space, DecisionTreeClassifier(random_state=0).fit(X, (X[:, 1] != 1).astype(int))


def test_an_ordinal_switches_to_its_levels_only_not_those_between():
    # lo may become hi, not mid: the two points of the neighbourhood are class 1
    space, tree = ordinal_tree()
    adv = kn.KAdversary(tree, space, make_solver("highs"), SolverSettings())
    verdict = adv.check(pd.DataFrame({"a": [0], "o": ["lo"]}),
                        pd.DataFrame({"a": [2], "o": ["lo"]}), 1)
    assert verdict.robust is True and verdict.point.iloc[0]["o"] in ("lo", "hi")
    # the same adversary, next check: a changed o (lo -> mid) stays put, no level kept
    # from the last check's restriction
    verdict = adv.check(pd.DataFrame({"a": [0], "o": ["lo"]}),
                        pd.DataFrame({"a": [2], "o": ["mid"]}), 0)
    assert verdict.robust is True and verdict.point.iloc[0].to_dict() == {"a": 2, "o": "mid"}
    # a kept mid may switch to hi, the adjacent level, of class 1
    verdict = adv.check(pd.DataFrame({"a": [0], "o": ["mid"]}),
                        pd.DataFrame({"a": [2], "o": ["mid"]}), 0)
    assert verdict.robust is False and verdict.point.iloc[0].to_dict() == {"a": 2, "o": "hi"}


# ------------------------------------------------------------ settings and defaults
def test_the_default_tolerance_certifies_a_small_positive_bound():
    space = space_of()
    adv = kn.KAdversary(linear(space, q=0.0), space, make_solver("highs"), SolverSettings())
    verdict = adv.check(X, row(6, 3, "p"), 1)
    assert verdict.robust is True and verdict.bound == pytest.approx(1 / 6, abs=1e-6)
    assert 0 < verdict.time < 60


def test_a_bound_at_the_tolerance_does_not_certify():
    adv = adversary(q=0.0)
    bound = adv.check(X, row(6, 3, "p"), 1).bound
    adv.tolerance = bound
    verdict = adv.check(X, row(6, 3, "p"), 1)
    assert verdict.bound == bound and verdict.robust is None and verdict.predicted == 1


def test_the_model_is_built_as_asked():
    space = space_of()
    net = linear(space)
    backend = make_solver("highs")
    assert kn.KAdversary(net, space, backend, SolverSettings()).m.bound_tightening.method \
        == "lp"
    assert kn.KAdversary(net, space, backend, SolverSettings(),
                         bound_tightening="interval").m.bound_tightening.method == "interval"
    tspace, tree = ordinal_tree()
    assert kn.KAdversary(tree, tspace, backend, SolverSettings(),
                         tree_formulation="threshold").m.tree_formulation == "threshold"


def test_the_regressor_message():
    space = space_of()
    model = LinearRegression().fit(np.eye(space.n_inputs), np.arange(space.n_inputs))
    with pytest.raises(ValueError, match=r"^K-robustness is defined for classifiers \(a class "
                                         r"to keep\); got a regressor$"):
        kn.KAdversary(model, space, make_solver("highs"), SolverSettings())


def test_the_adversarys_components_are_cfopts_own(caplog):
    space, tree = ordinal_tree()
    adv = kn.KAdversary(tree, space, make_solver("highs"), SolverSettings())
    with caplog.at_level(logging.WARNING):
        adv.check(pd.DataFrame({"a": [0], "o": ["lo"]}), pd.DataFrame({"a": [2], "o": ["lo"]}),
                  1)
        assert len(adv.m.adversary_levels.rows) == 2  # the levels of o
        adv.check(pd.DataFrame({"a": [0], "o": ["lo"]}), pd.DataFrame({"a": [2], "o": ["lo"]}),
                  1)
    assert caplog.records == []  # the last check's levels deleted, not replaced
    assert all(adv.m.is_own_component(n)
               for n in ("adversary_coef", "adversary_objective", "adversary_levels"))
    assert adv.m.user_components() == []


def test_the_least_margin_over_an_ordinals_levels():
    """logit = 1/2 + o / 4 over o in {lo, mid, hi} = 0, 1, 2, of which a kept lo may
    become hi (its own level the lowest); a kept mid may become hi: adjacent levels, no
    restriction."""
    space = FeatureSpace([
        Feature("a", "integer", lower=0, upper=3),
        Feature("o", "ordinal", categories=("lo", "mid", "hi"),
                perturbation=Perturbation.to_categories("hi"))])
    layer = torch.nn.Linear(space.n_inputs, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.0, 0.25]]))
        layer.bias.fill_(0.5)
    adv = kn.KAdversary(torch.nn.Sequential(layer), space, make_solver("highs"),
                        SolverSettings())
    verdict = adv.check(pd.DataFrame({"a": [0], "o": ["lo"]}),
                        pd.DataFrame({"a": [2], "o": ["lo"]}), 1)
    assert verdict.robust is True and verdict.bound == pytest.approx(0.5, abs=1e-6)
    assert verdict.point.iloc[0]["o"] == "lo" and len(adv.m.adversary_levels.rows) == 2
    verdict = adv.check(pd.DataFrame({"a": [0], "o": ["mid"]}),
                        pd.DataFrame({"a": [2], "o": ["mid"]}), 1)
    assert verdict.bound == pytest.approx(0.75, abs=1e-6)
    assert len(adv.m.adversary_levels.rows) == 0


def test_the_strongest_other_class_at_the_model_inputs():
    adv = object.__new__(kn.KAdversary)
    adapter = SimpleNamespace(decision="argmax", n_logits=3, class_index=lambda t: t,
                              output=lambda Z: np.asarray(Z, dtype=float))
    adv.m = SimpleNamespace(adapter=adapter)
    assert adv._pairs(0, np.array([5.0, 1.0, 2.0])) == [{0: 1.0, 2: -1.0}, {0: 1.0, 1: -1.0}]
    assert adv._pairs(0, np.array([5.0, 2.0, 1.0])) == [{0: 1.0, 1: -1.0}, {0: 1.0, 2: -1.0}]


# ----------------------------------------------------------------------- the box
def box_space() -> FeatureSpace:
    return FeatureSpace([
        Feature("c", "categorical", categories=("p", "q", "r"),
                perturbation=Perturbation.to_categories("q")),
        Feature("d", "categorical", categories=("p", "q", "r"),
                perturbation=Perturbation.to_categories("q")),
        Feature("o", "ordinal", categories=("lo", "mid", "hi"),
                perturbation=Perturbation.to_categories("hi")),
        Feature("e", "binary", perturbation=Perturbation.to_categories(1)),
        Feature("u", "continuous", lower=2, upper=10, shift=2, scale=8, perturbation=SHIFT),
        Feature("i", "integer", lower=1, upper=5, shift=1, scale=4, perturbation=SHIFT),
        Feature("w", "continuous", lower=2, upper=10, shift=2, scale=8, perturbation=SHIFT)])


def test_the_box_of_the_variables_and_of_the_model_inputs():
    space = box_space()
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, 1))
    adv = kn.KAdversary(net, space, make_solver("highs"), SolverSettings())
    seen = []
    adv.m.predictor_constr.set_input_box = lambda lo, hi: seen.append((lo, hi))
    x = pd.DataFrame({"c": ["p"], "d": ["p"], "o": ["lo"], "e": [0], "u": [5.0], "i": [3],
                      "w": [4.0]})
    z = x.assign(d="r", w=6.0)  # d and w changed
    adv._set_box(space.validate(x).iloc[0], space.validate(z).iloc[0])
    m = adv.m
    assert [m.onehot["c", lv].fixed for lv in "pqr"] == [False, False, True]
    assert [m.onehot["d", lv].value for lv in "pqr"] == [0, 0, 1]
    assert all(m.onehot["d", lv].fixed for lv in "pqr")
    assert (m.x_steps["o"].lb, m.x_steps["o"].ub) == (0, 2)
    assert (m.x_steps["e"].lb, m.x_steps["e"].ub) == (0, 1)
    assert (m.x_unit["u"].lb, m.x_unit["u"].ub) == (0.25, 0.5)
    assert (m.x_steps["i"].lb, m.x_steps["i"].ub) == (1, 3)  # codes 2-4 from 1
    assert m.x_unit["w"].fixed and m.x_unit["w"].value == 0.5
    (lo, hi), = seen
    #                c: p  q  r  d: p  q  r  o  e  u     i     w
    np.testing.assert_allclose(lo, [0, 0, 0, 0, 0, 1, 0, 0, 0.25, 0.25, 0.5])
    np.testing.assert_allclose(hi, [1, 1, 0, 0, 0, 1, 2, 1, 0.5, 0.75, 0.5])


# ----------------------------------------------------------- three classes by hand
def three_classes(y1, y2, y0=1.0):
    """Logits y0 (flat), y_k = alpha_k + beta_k t for (alpha_k, beta_k) = y1, y2, with t =
    b - 3 in [-1, 1] over the box of ``b`` around 3."""
    space = space_of(c=None)
    slices = space.input_slices()
    layer = torch.nn.Linear(space.n_inputs, 3)
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias[0] = y0
        for k, (alpha, beta) in ((1, y1), (2, y2)):
            layer.weight[k, slices["b"].start] = 6 * beta  # z_b = b / 6
            layer.bias[k] = alpha - 3 * beta
    return kn.KAdversary(torch.nn.Sequential(layer), space, make_solver("highs"),
                         SolverSettings(), tolerance=1e-6)


Z = row(6, 3, "p")


def test_the_strongest_other_class_is_tried_first_and_its_counterexample_ends_the_check():
    # at z class 2 is the runner-up: its margin falls to -0.1 (at b = 4, class 1 there),
    # class 1's would fall to -0.3
    verdict = three_classes((0.5, 0.8), (0.9, 0.2)).check(X, Z, 0)
    assert verdict.robust is False and verdict.predicted == 1
    assert verdict.bound == pytest.approx(-0.1, abs=1e-6)
    assert verdict.value == pytest.approx(-0.1, abs=1e-6)
    assert verdict.point.iloc[0]["b"] == 4


def test_a_positive_margin_goes_on_to_the_next_class():
    # class 2's margin stays at 0.05 > 0, though class 1 wins at its minimiser: the check
    # goes on to class 1's margin, -0.3
    verdict = three_classes((0.5, 0.8), (0.9, 0.05)).check(X, Z, 0)
    assert verdict.robust is False and verdict.predicted == 1
    assert verdict.bound == pytest.approx(-0.3, abs=1e-6)
    assert verdict.value == pytest.approx(-0.3, abs=1e-6)


def test_every_margin_is_bounded_before_certifying():
    # margins to class 2 (first): min 0.05 at b = 2; to class 1: min 0.3 at b = 4
    verdict = three_classes((0.5, 0.2), (0.9, -0.05)).check(X, Z, 0)
    assert verdict.robust is True and verdict.status is Status.OPTIMAL
    assert verdict.bound == pytest.approx(0.05, abs=1e-6)
    assert verdict.value == pytest.approx(0.05, abs=1e-6)
    assert verdict.point.iloc[0]["b"] == 2 and verdict.predicted == 0


# ----------------------------------------------------------------- the solver's side
class Scripted:
    """The HiGHS backend, recording the settings of each solve and reporting
    ``status`` instead of its own (``None``: its own)."""

    def __init__(self, status=None):
        self.backend, self.status, self.settings = make_solver("highs"), status, []

    def solve(self, m, settings=None):
        self.settings.append(settings)
        outcome = self.backend.solve(m, settings)
        if self.status is None:
            return outcome
        has = self.status.has_solution
        return dataclasses.replace(outcome, status=self.status,
                                   objective=outcome.objective if has else None)


def test_each_solve_gets_the_checks_settings_with_the_time_left():
    adv = three_classes((0.5, 0.2), (0.9, -0.05))
    adv.backend = solver = Scripted()
    adv.check(X, Z, 0, SolverSettings(time_limit=100.0, mip_gap=0.25))
    assert len(solver.settings) == 2
    assert all(s.mip_gap == 0.25 and 90 < s.time_limit <= 100 for s in solver.settings)
    assert solver.settings[1].time_limit <= solver.settings[0].time_limit


def test_a_solve_without_proof_is_the_checks_status():
    adv = adversary(q=0.0)
    adv.backend = Scripted(Status.FEASIBLE)
    verdict = adv.check(X, row(6, 3, "p"), 1)
    assert verdict.status is Status.FEASIBLE and verdict.point is not None
    adv.backend = Scripted(Status.NO_SOLUTION)
    verdict = adv.check(X, row(6, 3, "p"), 1)
    assert verdict.status is Status.NO_SOLUTION
    # no point, but its proven bound still certifies
    assert verdict.point is None and verdict.value is None and verdict.predicted is None
    assert verdict.robust is True and verdict.bound == pytest.approx(1 / 6, abs=1e-6)
