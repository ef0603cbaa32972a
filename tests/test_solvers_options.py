"""Raw solver options checked before any solve (:mod:`cfopt.solvers.options`): each
solver's own answer on a good name, an unknown name and a refused value (HiGHS, CBC's
executable, an empty Gurobi environment, CP-SAT's parameters), the errors naming the
option, and the cache of accepted sets."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from cfopt.solvers import options as so


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(so, "_ACCEPTED", set())


def refused(solver, options, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        so.check_options(solver, options)


def test_highs():
    so.check_options("highs", {"presolve": "off", "mip_rel_gap": 0.5})
    refused("highs", {"presolve": "off", "no_such": 1},
            "solver_options: highs has no option 'no_such' (see the HiGHS option list, "
            "https://ergo-code.github.io/HiGHS/stable/options/definitions/)")
    refused("highs", {"presolve": "maybe"},
            "solver_options: highs option 'presolve' refuses the value 'maybe'")


def test_cbc():
    if shutil.which("cbc") is None:
        pytest.skip("no cbc executable")
    so.check_options("cbc", {"presolve": "off", "seconds": 5})
    refused("cbc", {"no_such": 1}, "solver_options: cbc has no option 'no_such' "
                                   "(`cbc -?` lists them)")
    refused("cbc", {"presolve": "maybe"},
            "solver_options: cbc option 'presolve' refuses the value 'maybe'")
    refused("cbc", {"seconds": "abc"},
            "solver_options: cbc option 'seconds' refuses the value 'abc'")


def test_cbc_missing_or_failing_leaves_it_to_the_solve(monkeypatch):
    monkeypatch.setattr(so.shutil, "which", lambda name: None)
    assert so._cbc("no_such", 1) is None
    monkeypatch.setattr(so.shutil, "which", lambda name: "/bin/cbc")
    seen = []

    def fails(args, **kw):
        seen.append((args, kw))
        raise subprocess.TimeoutExpired(args, 30)

    monkeypatch.setattr(so.subprocess, "run", fails)
    assert so._cbc("no_such", 1) is None
    assert seen == [(["/bin/cbc", "-no_such", "1", "-quit"],
                     {"capture_output": True, "text": True, "timeout": 30})]
    monkeypatch.setattr(so.subprocess, "run", lambda *a, **kw: (_ for _ in ()).throw(
        OSError("exec format error")))
    assert so._cbc("no_such", 1) is None


def test_gurobi():
    pytest.importorskip("gurobipy")
    so.check_options("gurobi", {"TimeLimit": 5, "MIPFocus": 1})
    refused("gurobi", {"NoSuch": 1},
            "solver_options: gurobi option 'NoSuch': Unknown parameter 'NoSuch'")
    refused("gurobi", {"TimeLimit": "abc"},
            "solver_options: gurobi option 'TimeLimit' refuses the value 'abc': must be real "
            "number, not str")


def test_cpsat():
    pytest.importorskip("ortools")
    so.check_options("cpsat", {"max_time_in_seconds": 5.0, "num_workers": 1})
    refused("cpsat", {"no_such": 1},
            "solver_options: cpsat has no parameter 'no_such' (see "
            "ortools/sat/sat_parameters.proto, https://github.com/google/or-tools/blob/"
            "stable/ortools/sat/sat_parameters.proto)")
    with pytest.raises(ValueError, match="^solver_options: cpsat parameter "
                                         "'max_time_in_seconds' refuses the value 'x': "):
        so.check_options("cpsat", {"max_time_in_seconds": "x"})


def test_names_must_be_strings():
    refused("highs", {"presolve": "off", 1: "x"}, "solver option names must be strings, got 1")


def test_other_solvers_and_no_options_are_not_checked(monkeypatch):
    calls = []
    monkeypatch.setitem(so._CHECKS, "highs", lambda name, value: calls.append(name) or "bad")
    so.check_options("glpk", {"no_such": 1})
    so.check_options("highs", {})
    assert calls == [] and so._ACCEPTED == set()


def test_an_accepted_set_is_checked_once_in_any_order(monkeypatch):
    calls = []
    for solver in ("highs", "cbc"):
        monkeypatch.setitem(so._CHECKS, solver, lambda name, value: calls.append(name))
    so.check_options("highs", {"b": 1, "a": 2})
    so.check_options("highs", {"a": 2, "b": 1})
    assert calls == ["b", "a"]
    so.check_options("highs", {"a": 3, "b": 1})  # another value: another set
    assert calls == ["b", "a", "a", "b"]
    so.check_options("cbc", {"a": 2, "b": 1})  # another solver
    assert len(calls) == 6 and len(so._ACCEPTED) == 3
