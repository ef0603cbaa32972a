"""The registry of per-query restrictions (:mod:`cfopt.query.restrictions.registry`):
the base class's defaults, registration, and the look-up by the predictor block's class
(most specific first, ``None`` for an unregistered one)."""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from cfopt.query.restrictions import registry as R
from cfopt.query.restrictions.registry import (
    Restricted,
    Restriction,
    register_restriction,
    restriction_of,
)


class Plain(Restriction):
    def heuristic(self, m):
        return None

    def restrict(self, m, candidate, radius, details, deadline, verified):
        return None


class Base:
    pass


class Middle(Base):
    pass


class Leaf(Middle):
    pass


def test_defaults():
    r = Plain()
    assert Plain.by_radius is False and r.by_radius is False
    assert r.applies("m") is True
    details: dict = {}
    assert r.whole("m", details, 1.0) is False and details == {}
    assert r.within_radius("m", 1.0, details) is None and details == {}
    assert r.within_radius("m", 1.0, details, support=("a",), copies=("c",)) is None
    with pytest.raises(TypeError):
        Restriction()


def test_restricted():
    context = nullcontext()
    got = Restricted(context)
    assert got.context is context and got.rebuilt is False
    assert Restricted(context, rebuilt=True).rebuilt is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.rebuilt = True


def test_registration_and_look_up(monkeypatch):
    monkeypatch.setattr(R, "RESTRICTIONS", {})
    base, middle = Plain(), Plain()
    assert restriction_of(SimpleNamespace(predictor_constr=Leaf())) is None
    register_restriction(Base, base)
    assert R.RESTRICTIONS == {Base: base}
    assert restriction_of(SimpleNamespace(predictor_constr=Leaf())) is base
    register_restriction(Middle, middle)
    assert restriction_of(SimpleNamespace(predictor_constr=Leaf())) is middle
    assert restriction_of(SimpleNamespace(predictor_constr=Middle())) is middle
    assert restriction_of(SimpleNamespace(predictor_constr=Base())) is base
    assert restriction_of(SimpleNamespace(predictor_constr=object())) is None
    register_restriction(Base, middle)  # replaced
    assert R.RESTRICTIONS == {Base: middle, Middle: middle}


def test_the_registered_kinds():
    from cfopt.formulations.predictors.network import NetworkPredictorConstr
    from cfopt.formulations.predictors.trees import TreePredictorConstr

    assert type(R.RESTRICTIONS[NetworkPredictorConstr]).__name__ == "ReluRestriction"
    assert type(R.RESTRICTIONS[TreePredictorConstr]).__name__ == "TreeRestriction"
