"""Infeasibility diagnosis (:mod:`cfopt.query.diagnosis`) on a hand-made Pyomo model and a
scripted backend whose feasibility is a predicate over the active constraints: the groups
found, each group's minimal members, the joint deletion filter, unreachable, undecided
and inconsistent verdicts, the probe's settings, the relaxable groups and their members,
restoration of every component after a probe, and the exact message of each verdict."""

from __future__ import annotations

import pyomo.environ as pyo
import pytest

from cfopt.query import diagnosis as D
from cfopt.query.diagnosis import (
    MAX_MEMBERS,
    Diagnosis,
    _deactivated,
    _members,
    _minimal_members,
    diagnose,
    relaxable_groups,
)
from cfopt.results.status import Status
from cfopt.solvers import SolveOutcome, SolverBackend, SolverSettings


class Model(pyo.ConcreteModel):
    """The pieces of a counterfactual model :func:`diagnose` reads."""

    def user_components(self):
        return [getattr(self, n) for n in self.user if getattr(self, n).active]


def model(immutable=("a", "b", "c"), increase=("d",), user=("rule", "blk")) -> Model:
    m = Model()
    m.x = pyo.Var()
    m.immutable = pyo.Constraint(list(immutable), rule=lambda m, i: m.x <= 1)
    m.increase_only = pyo.Constraint(list(increase), rule=lambda m, i: m.x >= 0)
    m.decrease_only = pyo.Constraint([], rule=lambda m, i: m.x >= 0)
    m.user = list(user)
    if "rule" in user:
        m.rule = pyo.Constraint(expr=m.x >= 2)
    if "blk" in user:
        m.blk = pyo.Block()
        m.blk.c = pyo.Constraint(expr=m.x >= 3)
    if "other" in user:
        m.other = pyo.Constraint(expr=m.x >= 4)
    return m


def active(m) -> set[str]:
    """Names of the active constraints and blocks of ``m`` (``immutable[a]``, ``rule``)."""
    names = {c.name for c in m.component_data_objects(pyo.Constraint, active=True,
                                                       descend_into=False)}
    return names | {b.name for b in m.component_objects(pyo.Block, active=True,
                                                         descend_into=False)}


class Backend:
    """Feasible when ``rule(active names)``; records each probe."""

    def __init__(self, rule, status=Status.INFEASIBLE) -> None:
        self.rule, self.status, self.probes, self.settings = rule, status, [], []

    def solve(self, m, settings):
        self.probes.append(active(m))
        self.settings.append(settings)
        status = Status.FEASIBLE if self.rule(active(m)) else self.status
        return SolveOutcome(status, None, None, 0.0, 0.0, "t")


def run(monkeypatch, m, rule, status=Status.INFEASIBLE, solver="highs", settings=None):
    backend = Backend(rule, status)
    names = []
    monkeypatch.setattr(D, "make_solver", lambda name: names.append(name) or backend)
    before = active(m)
    got = diagnose(m, solver, settings or SolverSettings(time_limit=5.0))
    assert active(m) == before  # everything relaxed by a probe is restored
    assert names == ["highs"]
    return got, backend


def test_a_single_group_and_its_one_culprit(monkeypatch):
    m = model()
    got, backend = run(monkeypatch, m, lambda a: "immutable[b]" not in a)
    assert got == Diagnosis(groups=["immutable"], members={"immutable": ["b"]})
    # one probe per group, then the deletion filter over the three members
    assert len(backend.probes) == 4 + 3
    assert backend.probes[0] == active(m) - {"immutable[a]", "immutable[b]", "immutable[c]"}


def test_members_minimal_when_two_are_needed(monkeypatch):
    m = model(immutable=("a", "b", "c", "d"))
    got, _ = run(monkeypatch, m, lambda a: not {"immutable[b]", "immutable[d]"} & a)
    assert got.groups == ["immutable"] and got.members == {"immutable": ["b", "d"]}
    assert not got.joint and not got.unreachable and not got.undecided


def test_each_of_two_groups_suffices(monkeypatch):
    m = model()
    got, _ = run(monkeypatch, m, lambda a: "rule" not in a or "increase_only[d]" not in a)
    assert got.groups == ["increase_only", "rule"]
    assert got.members == {"increase_only": ["d"], "rule": []}
    assert not got.joint and not got.inconsistent


def test_a_block_group_has_no_members(monkeypatch):
    got, _ = run(monkeypatch, model(), lambda a: "blk" not in a)
    assert got == Diagnosis(groups=["blk"], members={"blk": []})


def test_joint_groups_by_the_deletion_filter(monkeypatch):
    m = model(user=("rule", "blk", "other"))
    # infeasible unless both rule and other are relaxed; blk is innocent
    got, backend = run(monkeypatch, m, lambda a: not {"rule", "other"} & a)
    assert got.groups == ["rule", "other"] and got.joint
    assert got.members == {} and not got.unreachable and not got.inconsistent
    assert not got.undecided
    # 5 groups one by one, all relaxed, then one probe per group of the filter
    assert len(backend.probes) == 5 + 1 + 5


def test_joint_needs_all(monkeypatch):
    m = model(user=("rule", "blk"))
    got, _ = run(monkeypatch, m, lambda a: not {"rule", "blk", "immutable[a]"} & a)
    assert got.groups == ["immutable", "rule", "blk"] and got.joint


def test_unreachable_when_nothing_helps(monkeypatch):
    got, backend = run(monkeypatch, model(), lambda a: False)
    assert got == Diagnosis(unreachable=True)
    assert len(backend.probes) == 4 + 1 and backend.probes[-1] == set()  # all relaxed


def test_undecided_probes_are_not_unreachable(monkeypatch):
    got, _ = run(monkeypatch, model(), lambda a: False, status=Status.NO_SOLUTION)
    assert got == Diagnosis(undecided=True)
    got, _ = run(monkeypatch, model(), lambda a: False, status=Status.ERROR)
    assert got == Diagnosis(undecided=True)


def test_undecided_probe_after_a_found_group(monkeypatch):
    got, _ = run(monkeypatch, model(), lambda a: "rule" not in a, status=Status.NO_SOLUTION)
    assert got.groups == ["rule"] and got.undecided and not got.unreachable


def test_inconsistent_when_feasible_with_nothing_relaxed(monkeypatch):
    m = model(immutable=(), increase=(), user=())
    got, backend = run(monkeypatch, m, lambda a: True)
    assert got == Diagnosis(joint=True, inconsistent=True)
    assert len(backend.probes) == 1


def test_probe_settings(monkeypatch):
    settings = SolverSettings(time_limit=50.0, mip_gap=0.01, threads=3, seed=7,
                              options={"k": 1}, verbose=True)
    _, backend = run(monkeypatch, model(), lambda a: "rule" not in a, settings=settings)
    probe = backend.settings[0]
    assert (probe.time_limit, probe.mip_gap, probe.threads, probe.seed, probe.options) == (
        30.0, 0.999, 3, 7, {"k": 1})
    assert probe.verbose is False
    for limit, expected in ((None, 30.0), (5.0, 5.0), (30.0, 30.0), (31.0, 30.0)):
        _, backend = run(monkeypatch, model(), lambda a: False,
                         settings=SolverSettings(time_limit=limit))
        assert {s.time_limit for s in backend.settings} == {expected}


def test_a_backend_instance_is_replaced_by_a_fresh_one_of_its_name(monkeypatch):
    class Mine(SolverBackend):
        name = "highs"

        def available(self):
            return True

        def _solve(self, model, settings):
            raise AssertionError("the caller's backend is not used")

    got, _ = run(monkeypatch, model(), lambda a: "rule" not in a, solver=Mine())
    assert got.groups == ["rule"]


def test_relaxable_groups():
    m = model()
    assert list(relaxable_groups(m)) == ["immutable", "increase_only", "rule", "blk"]
    assert relaxable_groups(m)["immutable"] is m.immutable
    assert relaxable_groups(m)["blk"] is m.blk
    m.increase_only.deactivate()  # inactive group
    m.immutable["a"].deactivate()
    assert list(relaxable_groups(m)) == ["immutable", "rule", "blk"]
    m.immutable["b"].deactivate()
    m.immutable["c"].deactivate()  # active component, no active member
    m.rule.deactivate()
    assert list(relaxable_groups(m)) == ["blk"]
    m.max_changes = pyo.Constraint(expr=m.x <= 9)  # a scalar actionability group
    assert list(relaxable_groups(m)) == ["max_changes", "blk"]


def test_members():
    m = model()
    assert list(_members(m.blk)) == [("blk", m.blk)]
    assert list(_members(m.rule)) == [("rule", m.rule)]
    m.immutable["b"].deactivate()
    assert list(_members(m.immutable)) == [("a", m.immutable["a"]), ("c", m.immutable["c"])]
    assert list(_members(m.decrease_only)) == []


def test_deactivated_restores_only_what_it_deactivated():
    m = model()
    m.immutable["a"].deactivate()
    items = [m.immutable["a"], m.immutable["b"], m.rule, m.blk]
    with _deactivated(iter(items)):
        assert active(m) == {"immutable[c]", "increase_only[d]"}
    assert active(m) == {"immutable[b]", "immutable[c]", "increase_only[d]", "rule", "blk"}
    with pytest.raises(KeyError), _deactivated([m.rule]):
        assert not m.rule.active
        raise KeyError
    assert m.rule.active


def test_minimal_members_sizes():
    m = model(immutable=("a",))
    assert _minimal_members(m.blk, lambda: pytest.fail("no probe")) == []
    assert _minimal_members(m.rule, lambda: pytest.fail("no probe")) == []
    assert _minimal_members(m.immutable, lambda: pytest.fail("no probe")) == ["a"]
    assert _minimal_members(m.decrease_only, lambda: True) == []
    labels = [f"f{i}" for i in range(MAX_MEMBERS + 1)]
    m.big = pyo.Constraint(labels, rule=lambda m, i: m.x <= 1)
    assert _minimal_members(m.big, lambda: pytest.fail("no probe")) == []
    m.big[labels[0]].deactivate()  # MAX_MEMBERS active members: examined
    assert MAX_MEMBERS == 40
    assert _minimal_members(m.big, lambda: "big[f7]" not in active(m)) == ["f7"]
    assert len(active(m) & {f"big[{i}]" for i in labels}) == MAX_MEMBERS


def test_minimal_members_keeps_the_needed_ones_relaxed():
    m = model(immutable=("a", "b", "c", "d"))
    seen = []

    def feasible():
        seen.append(active(m) & {"immutable[a]", "immutable[b]", "immutable[c]",
                                 "immutable[d]"})
        return not {"immutable[a]", "immutable[c]"} & active(m)

    assert _minimal_members(m.immutable, feasible) == ["a", "c"]
    assert seen == [{"immutable[a]"}, {"immutable[b]"}, {"immutable[b]", "immutable[c]"},
                    {"immutable[b]", "immutable[d]"}]
    assert {"immutable[a]", "immutable[b]", "immutable[c]", "immutable[d]"} <= active(m)


HEAD = "no counterfactual can be classified as [1]"


@pytest.mark.parametrize("diagnosis, text", [
    (Diagnosis(unreachable=True, inconsistent=True, groups=["g"]),
     f"{HEAD}: no point inside the feature bounds reaches the target, even with every "
     f"actionability and user constraint relaxed; widen the bounds (space.set(name, "
     f"lower=..., upper=...)) or change the target"),
    (Diagnosis(inconsistent=True, groups=["g"]),
     f"{HEAD}: the solver reported the problem infeasible, but re-solving it unchanged "
     f"found a solution (numerical trouble); try another solver"),
    (Diagnosis(),
     f"{HEAD} under the declared constraints (proven by the solver); the diagnosis could "
     f"not isolate the conflicting group within its time limit"),
    (Diagnosis(groups=["rule", "immutable"], members={"immutable": ["a", "b"]}, joint=True),
     f"{HEAD}: the constraint groups 'rule', 'immutable' (relax 'a', 'b') jointly conflict "
     f"with the target; relaxing all of them makes the problem feasible"),
    (Diagnosis(groups=["immutable"], members={"immutable": ["a"]}),
     f"{HEAD}: the constraint group 'immutable' (relax 'a') conflicts with the target; "
     f"relaxing it makes the problem feasible"),
    (Diagnosis(groups=["blk"], members={"blk": []}),
     f"{HEAD}: the constraint group 'blk' conflicts with the target; relaxing it makes "
     f"the problem feasible"),
    (Diagnosis(groups=["blk", "immutable"], members={"immutable": ["a"]}),
     f"{HEAD}: each of the constraint groups 'blk', 'immutable' (relax 'a') conflicts "
     f"with the target; relaxing any one of them makes the problem feasible"),
])
def test_message(diagnosis, text):
    assert diagnosis.message("be classified as [1]") == text
