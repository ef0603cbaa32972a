"""Bad input gets a precise error and nothing partial: the table of
``tests/bad_input_cases.py`` (shared with ``benchmarks/robustness_suite.py``), and the
command line's refusal to unpickle without ``--allow-pickle``."""

from __future__ import annotations

import json

import pytest

import cfopt
from cfopt.cli import main

from .bad_input_cases import CASES, Case, Context, _csv, _pickled, make_context, run_case


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> Context:
    return make_context(tmp_path_factory.mktemp("bad_input"))


def test_table_covers_at_least_thirty_distinct_cases():
    names = [c.name for c in CASES]
    assert len(names) >= 30 and len(set(names)) == len(names)
    assert all(c.words for c in CASES)  # every case names what was wrong


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(ctx: Context, case: Case):
    reason = case.skip() if case.skip is not None else None
    if reason:
        pytest.skip(reason)
    outcome = run_case(case, ctx)
    assert outcome.ok, f"{outcome.problems}; message: {outcome.message!r}"


def test_run_case_flags_a_case_that_does_not_raise(ctx: Context):
    """The harness itself: a call that returns, or raises a subclass, is not ok."""
    returns = Case("returns", lambda c: c.explainer.explain(c.x, target=1), ValueError, ("x",))
    outcome = run_case(returns, ctx)
    assert not outcome.ok and outcome.got_error is None
    assert "returned Counterfactual instead of raising" in outcome.problems[0]
    subclass = Case("subclass", lambda c: cfopt.Explainer(c.net, c.space, solver="glpk"),
                    cfopt.errors.SolverError, ("glpk",))
    assert not run_case(subclass, ctx).ok  # SolverNotAvailableError is not exactly it


def _explain_args(ctx: Context, model: str) -> list[str]:
    space = ctx.folder / "space.json"
    ctx.space.to_json(str(space))
    return ["explain", "--model", model, "--data", _csv(ctx), "--target-col", "label",
            "--row", "1", "--space", str(space), "--json"]


def test_cli_refuses_a_pickle_without_allow_pickle(ctx: Context, capsys):
    model = _pickled(ctx)
    assert main(_explain_args(ctx, model)) == 2
    out = capsys.readouterr()
    assert out.out == "" and "--allow-pickle" in out.err and "arbitrary code" in out.err


def test_cli_pickle_magic_is_recognised_whatever_the_name(ctx: Context, capsys):
    renamed = ctx.folder / "model.onnx"
    renamed.write_bytes(open(_pickled(ctx), "rb").read())
    assert main(_explain_args(ctx, str(renamed))) == 2
    assert "is a pickle" in capsys.readouterr().err


def test_cli_loads_a_pickle_with_allow_pickle(ctx: Context, capsys):
    assert main([*_explain_args(ctx, _pickled(ctx)), "--allow-pickle"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verified"] and result["status"] == "optimal"


def test_cli_help_warns_about_pickles(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--allow-pickle" in text and "WARNING: unpickling runs arbitrary code" in text
