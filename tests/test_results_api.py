"""One result API (issue 20): every answer — plain, set, model-shift robust, perturbation
robust — has ``counterfactual`` (a raw DataFrame), ``changes()``, ``plot()``,
``to_dict()`` / ``to_json()``, ``status``, ``verified``, a certificate where it applies,
and a short repr; every robust method takes ``(model, space, [data], *, delta=...)``."""

from __future__ import annotations

import inspect
import json

import pandas as pd
import pytest

import cfopt
from cfopt.results.counterfactual import Answer

from .conftest import train_torch

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def toy_net(toy):
    """The toy data, its space, a small ReLU network and a row it rejects."""
    frame, y = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    net = train_torch(space.transform(frame), y, hidden=(6,), epochs=60)
    rejected = cfopt.models.parse_model(net).predict(space.transform(frame)) == 0
    return frame, space, net, frame[rejected].iloc[[0]]


@pytest.fixture(scope="module")
def answers(toy_net) -> dict[str, Answer]:
    """One answer of each kind to the same query."""
    frame, space, net, x = toy_net
    return {
        "plain": cfopt.Explainer(net, space).explain(x, target=1),
        "set": cfopt.Explainer(net, space).explain(x, target=1, n=2),
        "milp": cfopt.NonRobustMILP(net, space, delta=0.01).explain(x, target=1),
        "proplace": cfopt.Proplace(net, space, frame, delta=0.01, k=5).explain(x, target=1),
        "rnce": cfopt.RNCE(net, space, frame, delta=0.01).explain(x, target=1),
        "ck": cfopt.PerturbationRobustExplainer(net, space, robustness="C").explain(x, 1),
    }


def test_every_answer_has_the_same_api(answers):
    import matplotlib

    matplotlib.use("Agg")
    for kind, answer in answers.items():
        assert isinstance(answer, Answer), kind
        assert answer.verified, kind
        row = answer.counterfactual
        assert isinstance(row, pd.DataFrame) and len(row) == 1, kind
        changes = answer.changes()
        assert list(changes.columns) == ["from", "to"] and len(changes) > 0, kind
        d = answer.to_dict()
        assert d["status"] == answer.status.value and d["verified"] is True, kind
        assert json.loads(answer.to_json())["status"] == answer.status.value, kind
        assert answer.plot() is not None, kind
        text = repr(answer)
        assert text.startswith(type(answer).__name__) and len(text) < 2000, kind
    matplotlib.pyplot.close("all")


def test_certificates_and_short_reprs(answers):
    found = answers
    for kind in ("milp", "proplace", "rnce"):
        certificate = found[kind].certificate
        assert certificate.delta == 0.01
        assert "weight" not in repr(certificate) and len(repr(certificate)) < 1000
    assert found["ck"].certificate is found["ck"].k_verdict
    members = found["set"]
    assert members.counterfactual.equals(members[0].counterfactual)
    assert set(members.changes().index.get_level_values("member")) <= {0, 1}


def test_k_certify_takes_any_answer(toy_net):
    frame, space, net, x = toy_net
    ex = cfopt.PerturbationRobustExplainer(net, space, robustness="none")
    plain = cfopt.Explainer(net, space).explain(x, target=1)
    by_answer = ex.certify(x, plain)
    by_row = ex.certify(x, plain.counterfactual, 1)
    assert by_answer.robust == by_row.robust and by_answer.bound == by_row.bound


@pytest.mark.parametrize("method", [cfopt.NonRobustMILP, cfopt.MILPR, cfopt.Proplace,
                                    cfopt.RNCE])
def test_constructors_take_delta_by_keyword(method):
    parameters = inspect.signature(method).parameters
    positional = [p for p, v in parameters.items()
                  if v.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional[:2] == ["model", "space"]
    assert positional[2:] in ([], ["data"])
    assert parameters["delta"].kind is inspect.Parameter.KEYWORD_ONLY


def test_every_answer_has_a_notebook_card(answers):
    for kind, answer in answers.items():
        markup = answer._repr_html_()
        assert type(answer).__name__ in markup and answer.status.value in markup, kind
        assert "cfopt-proven" in markup or "cfopt-unproven" in markup, kind
        changes = answer.changes()
        names = changes.index.get_level_values(-1)  # a set's index is (member, feature)
        assert len(names) and all(f"<th>{name}</th>" in markup for name in names), kind
    for kind in ("milp", "proplace", "rnce"):
        assert "<th>certified</th>" in answers[kind]._repr_html_(), kind
    assert "<th>robustness</th>" in answers["ck"]._repr_html_()
