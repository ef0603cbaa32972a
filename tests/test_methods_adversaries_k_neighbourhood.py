"""The K-adversary (:mod:`cfopt.methods.adversaries.k_neighbourhood`) on a linear model
by hand over two perturbed integer features and a categorical one: the box it searches
(kept features within their annotations, changed ones fixed), its verdicts and bounds,
the order of the margins it tries, the loop's step and its scenarios."""

from __future__ import annotations

import copy
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
