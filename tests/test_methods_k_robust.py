"""C- and K-robust counterfactuals (:mod:`cfopt.methods.k_robust`): the master of the K
loop by hand with a scripted explainer, the options and their errors, the certify
entry point, and each robustness sought on a two-feature linear model by hand (tiny
HiGHS solves)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from cfopt import Perturbation
from cfopt.methods import k_robust as kr
from cfopt.results.robust import RobustStatus
from cfopt.results.status import Status
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace


# ------------------------------------------------------------------ the master
class Runner:
    def __init__(self, *answers) -> None:
        self.answers, self.calls = list(answers), []

    def answer(self, settings, started, diagnose_infeasible, floor):
        self.calls.append((settings, started, diagnose_infeasible, floor))
        return self.answers.pop(0)


def ce(status=Status.OPTIMAL, bound=None, found=True, message="m"):
    return SimpleNamespace(status=status, bound=bound, found=found, message=message,
                           counterfactual="row" if found else None, predicted_class=1)


def master(*answers, scenarios=None, ladder=True):
    explainer = SimpleNamespace(runner=Runner(*answers))
    return kr.ExplainerMaster(explainer, scenarios, ladder)


DEADLINE = SimpleNamespace(settings="s", started=3.0)


def test_the_master_answers_with_the_explainers_point_and_climbs_from_its_bound():
    first, second, third = ce(bound=1.5), ce(bound=1.25), ce(bound=2.0)
    p = master(first, second, third)
    answer = p.solve(DEADLINE)
    assert (answer.status, answer.point, answer.bound, answer.label, answer.answer) == \
        (Status.OPTIMAL, "row", 1.5, 1, first)
    assert p.floor == 1.5
    p.solve(DEADLINE)
    assert p.floor == 1.5  # a lower bound does not lower it
    p.solve(DEADLINE)
    assert p.floor == 2.0
    assert p.explainer.runner.calls == [("s", 3.0, False, None), ("s", 3.0, False, 1.5),
                                        ("s", 3.0, False, 1.5)]


@pytest.mark.parametrize("bound", [None, math.inf, math.nan])
def test_no_finite_bound_no_floor(bound):
    p = master(ce(bound=bound), ce())
    p.solve(DEADLINE)
    assert p.floor is None
    p.solve(DEADLINE)
    assert p.explainer.runner.calls[1][3] is None


def test_a_negative_first_bound_is_a_floor():
    p = master(ce(bound=-0.5))
    p.solve(DEADLINE)
    assert p.floor == -0.5


def test_without_the_ladder_no_floor_is_passed():
    p = master(ce(bound=1.5), ce(), ladder=False)
    p.solve(DEADLINE)
    p.solve(DEADLINE)
    assert p.floor == 1.5 and p.explainer.runner.calls[1][3] is None


@pytest.mark.parametrize("scenarios, says", [
    (None, "proven: no counterfactual meets the constraints"),
    (SimpleNamespace(scenarios=[]), "proven: no counterfactual meets the constraints"),
    (SimpleNamespace(scenarios=[1, 2]),
     "proven: no counterfactual meets the constraints and the 2 K-perturbation scenarios")])
def test_an_infeasible_master_says_what_it_proves(scenarios, says):
    infeasible = ce(Status.INFEASIBLE, found=False)
    answer = master(infeasible, scenarios=scenarios).solve(DEADLINE)
    assert answer.status is Status.INFEASIBLE and answer.message == says
    assert answer.point is None and answer.answer is infeasible


def test_a_master_out_of_time_keeps_its_message():
    late = ce(Status.NO_SOLUTION, found=False, message="late")
    answer = master(late, scenarios=SimpleNamespace(scenarios=[1])).solve(DEADLINE)
    assert answer.status is Status.NO_SOLUTION and answer.message == "late"


# ------------------------------------------------------------------ end to end
SHIFT = Perturbation.absolute(increase=1, decrease=1)


def space_of() -> FeatureSpace:
    """Two integer features on 0..6, each perturbed by ±1."""
    return FeatureSpace([Feature(name, "integer", lower=0, upper=6, shift=0, scale=6,
                                 spread=6, perturbation=SHIFT) for name in ("a", "b")])


def net() -> torch.nn.Sequential:
    """logit = z_a + z_b / 2 - 1 on z = v / 6: the target 1 from a + b/2 > 6."""
    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 0.5]]))
        layer.bias.fill_(-1.0)
    return torch.nn.Sequential(layer)


FACTUAL = pd.DataFrame({"a": [0], "b": [3]})


def explain(robustness, **options):
    return kr.PerturbationRobustExplainer(net(), space_of(), robustness=robustness,
                                          **options).explain(FACTUAL, 1)


def test_the_closest_counterfactual_without_robustness():
    r = explain("none")
    assert r.status is RobustStatus.CERTIFIED and r.robustness == "none"
    assert r.counterfactual.iloc[0].to_dict() == {"a": 5, "b": 3}  # 5 + 3/2 > 6
    assert r.objective == pytest.approx(5 / 6)
    assert r.k_verdict is None and r.scenarios == [] and r.iterations == 1
    assert r.setback_cost == pytest.approx(1 / 6)  # a's setback of 1 on its range 6
    assert r.optimal and r.total_time >= r.adversary_time >= 0


def test_the_k_robust_counterfactual_survives_the_setback():
    r = explain("K")
    assert r.status is RobustStatus.CERTIFIED and r.k_verdict.robust
    # b kept at 3 may fall to 2: a = 5 no longer suffices; one more unit of a or b
    assert r.objective == pytest.approx(1.0)
    assert r.iterations >= 2 and len(r.scenarios) >= 1 and r.optimal
    assert r.certificate is r.k_verdict


def test_the_c_robust_counterfactual_pays_its_setback():
    r = explain("C")
    assert r.status is RobustStatus.CERTIFIED and r.k_verdict is None
    assert r.setback_cost == pytest.approx(1 / 6) and r.scenarios == []


def test_options_are_named():
    with pytest.raises(ValueError, match=r"robustness must be one of \('none', 'C', 'K', "
                                         r"'CK'\), got 'X'"):
        kr.PerturbationRobustExplainer(net(), space_of(), robustness="X")
    with pytest.raises(TypeError, match="query_bounds must be True or False"):
        kr.PerturbationRobustExplainer(net(), space_of(), query_bounds=1)
    with pytest.raises(TypeError, match="ladder must be True or False"):
        kr.PerturbationRobustExplainer(net(), space_of(), ladder=None)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['foo'\] for explain\(\); "
                                        r"accepted: time_limit, mip_gap"):
        kr.PerturbationRobustExplainer(net(), space_of()).explain(FACTUAL, 1, foo=1)
    method = kr.PerturbationRobustExplainer(net(), space_of(), robustness="C",
                                            max_iterations=3, tolerance=1e-3,
                                            query_bounds=False, ladder=False)
    assert (method.robustness, method.max_iterations, method.tolerance,
            method.query_bounds, method.ladder) == ("C", 3, 1e-3, False, False)
    assert method.loop.max_iterations == 3 and method._scenarios is None
    assert kr.PerturbationRobustExplainer(net(), space_of()).robustness == "CK"


def test_certify_takes_a_row_or_an_answer():
    method = kr.PerturbationRobustExplainer(net(), space_of(), robustness="K")
    none = explain("none")
    verdict = method.certify(FACTUAL, none)
    assert verdict.robust is False  # b falls to 2: 5 + 1 = 6 is no margin
    assert method.certify(FACTUAL, pd.DataFrame({"a": [6], "b": [3]}), 1).robust is True
    assert method.certify(FACTUAL, none.counterfactual, 1).robust is False
    assert method.adversary is method.adversary
    with pytest.raises(ValueError, match="give the label the model assigns to z"):
        method.certify(FACTUAL, pd.DataFrame({"a": [6], "b": [4]}))
    failed = kr.PerturbationRobustExplainer(net(), space_of(), robustness="none",
                                            time_limit=1e-9).explain(FACTUAL, 1)
    with pytest.raises(ValueError, match="the answer has no counterfactual to certify "
                                         r"\(status "):
        method.certify(FACTUAL, failed)
