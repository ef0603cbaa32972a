"""Hardening report: every bad-input case, and the property checks run per model family.

Runs the table of ``tests/bad_input_cases.py`` (the same cases ``tests/test_bad_input.py``
asserts) and the hypothesis properties of ``tests/property_checks.py`` with the
``hardening-report`` profile (``--examples`` per family), and writes
``benchmarks/results/hardening.json``: one row per case (``case``, ``expected_error``,
``got_error``, ``ok``, the message), the examples run and any failures per family, and
the bugs the suite found and that were fixed.

    python benchmarks/robustness_suite.py [--examples 40] [--out hardening.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))  # the tests package holds the shared tables

import torch  # noqa: E402
from common import environment, write  # noqa: E402
from hypothesis import given, settings  # noqa: E402

from tests.bad_input_cases import CASES, make_context, run_case  # noqa: E402
from tests.property_checks import EXAMPLES, FAMILIES, check, examples  # noqa: E402

#: bugs the hardening suite found, each fixed in the library (commit on main)
BUGS_FIXED = [
    {"found_by": "duplicate column", "bug": "a row with a duplicated column failed inside "
     "pandas ('Data must be 1-dimensional'), naming nothing; from_frame failed with 'truth "
     "value of a Series is ambiguous'", "fix": "FeatureSpace.validate / from_frame refuse "
     "duplicate columns by name", "commit": "7957713"},
    {"found_by": "boolean in integer column, complex number", "bug": "True was taken as 1 "
     "for an integer feature, a complex value silently lost its imaginary part",
     "fix": "booleans (unless the feature is binary) and complex values are not numbers",
     "commit": "7957713"},
    {"found_by": "increase-only and decrease-only", "bug": "the second declaration silently "
     "replaced the first", "fix": "increase_only/decrease_only refuse the opposite "
     "direction and suggest immutable", "commit": "7957713"},
    {"found_by": "unknown feature kind, space JSON that does not parse", "bug": "'real' is "
     "not a valid Kind (no feature named); a raw JSONDecodeError without the file name",
     "fix": "errors name the feature and the file", "commit": "7957713"},
    {"found_by": "factual outside declared bounds", "bug": "row labels shown as "
     "np.int64(1) in messages", "fix": "plain Python row labels", "commit": "230b756"},
    {"found_by": "immutable feature must change", "bug": "the diagnosis named the group "
     "'immutable' but not the feature when the group had one member", "fix": "a single "
     "member of an indexed group is named ('relax 'income'')", "commit": "abfaaf8"},
    {"found_by": "NaN weights", "bug": "a Pyomo error about a NaN variable bound",
     "fix": "UnsupportedModelError naming the dense layer", "commit": "36e0ba2"},
    {"found_by": "unknown HiGHS option, HiGHS option value refused, unknown CBC option",
     "bug": "HiGHS and CBC ignored unknown option names and refused values and solved "
     "with their defaults (Gurobi raised a generic SolverError)", "fix": "solver options "
     "checked with the solver itself before any solve (cfopt/solvers/options.py): "
     "ValueError naming the option", "commit": "838342f"},
    {"found_by": "nonexistent solver", "bug": "Pyomo printed a traceback on stderr before "
     "cfopt's error", "fix": "the probe's log is intercepted", "commit": "c93dd3f"},
    {"found_by": "tests/test_limits.py (retries share the limit)", "bug": "each "
     "verification retry got the whole time limit: a query could take 4x its limit",
     "fix": "the query's solves share its limit (time_left)", "commit": "838342f"},
    {"found_by": "tests/test_limits.py (diverse set stops at the limit)", "bug": "a "
     "diverse set of n took up to n x the time limit", "fix": "the set's solves share the "
     "limit; stopped='time_limit' with the members found", "commit": "838342f"},
    {"found_by": "review of the PROPLACE loop for the time-limit tests", "bug": "adversary "
     "checks ignored the query's time limit, and a master time-out dropped the last "
     "point", "fix": "adversary MILPs get the remaining time; the last point is kept, "
     "marked TIME_LIMIT", "commit": "838342f"},
    {"found_by": "property checks, boosting family (XGBoost, raw income-like feature)",
     "bug": "the gap around a float32 split boundary (1e-7 x |boundary| at least) was wider "
     "than half a float32 ulp and swallowed the training value on the threshold (XGBoost "
     "thresholds are training values), e.g. the factual's own value: answers claimed "
     "OPTIMAL at twice the optimum, or the query was infeasible with max_changes",
     "fix": "the gap never extends past the boundary's float32 neighbours or the nearest "
     "training values", "commit": "3bc2ed4"},
    {"found_by": "property checks, boosting family (histogram boosting, standard-scaled "
     "integer feature)", "bug": "a threshold that is a training value, computed by the "
     "library as (code - shift) / scale, and the MILP's grid value offset + code x step "
     "differed by an ulp: the code sat on the wrong side, every point failed verification",
     "fix": "a grid value within rounding of the threshold keeps the threshold's side",
     "commit": "c73a9fc"},
    {"found_by": "the same counterexample", "bug": "verification retries raised the margin "
     "past the logits' range until the problem was infeasible, then reported an "
     "infeasibility diagnosis (a false claim that no counterfactual exists)",
     "fix": "retries that end infeasible or without a solution are VERIFICATION_FAILED",
     "commit": "c29d248"},
    {"found_by": "the same counterexample", "bug": "a diagnosis that found the problem "
     "feasible on re-check blamed its time limit", "fix": "Diagnosis.inconsistent: the "
     "message says the infeasibility claim did not reproduce", "commit": "f8fa58d"},
    {"found_by": "tests/test_tree_pruning.py (linf) while checking the tree fix; now also "
     "the property checks (L0 and L-inf objectives)", "bug": "objective='linf' crashed "
     "every Explainer (Pyomo RuntimeError re-assigning m.linf)", "fix": "the objective "
     "expression is kept off the model's components", "commit": "08858d7"},
    {"found_by": "property checks (scaling='none')", "bug": "spurious Pyomo W1002 warnings "
     "from OMLT's initial value 0 outside input bounds", "fix": "filtered during the "
     "network build", "commit": "196e618"},
    {"found_by": "pickled model without --allow-pickle", "bug": "cfopt explain had no "
     "way to take a pickled sklearn model, and nothing marked pickles as unsafe",
     "fix": "--allow-pickle (warning in the help); a pickle without it is refused",
     "commit": "770070c"},
]


def bad_input_rows() -> list[dict[str, Any]]:
    """Every case of the table, run against one shared context."""
    with tempfile.TemporaryDirectory() as folder:
        ctx = make_context(Path(folder))
        rows = []
        for case in CASES:
            reason = case.skip() if case.skip is not None else None
            if reason:
                rows.append({"case": case.name, "expected_error": case.error.__name__,
                             "got_error": None, "ok": None, "skipped": reason})
                continue
            rows.append(run_case(case, ctx).row())
    return rows


def property_runs(n_examples: int) -> dict[str, dict[str, Any]]:
    """The property checks, ``n_examples`` per family; a failure is hypothesis's
    shrunk counterexample."""
    profile = settings(settings.get_profile("hardening-report"), max_examples=n_examples)
    out = {}
    for family in FAMILIES:
        outcomes: dict[str, int] = {}

        @profile
        @given(ex=examples(family))
        def run(ex: Any) -> None:
            result = check(ex)
            outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
            assert not result.problems, f"{ex}: {result.problems}"

        t0 = time.perf_counter()
        failure = None
        try:
            run()
        except Exception as exc:  # a falsified property: recorded, the others still run
            failure = f"{type(exc).__name__}: {exc}"[:2000]
        out[family] = {"examples": EXAMPLES[family], "outcomes": outcomes,
                       "failure": failure, "seconds": round(time.perf_counter() - t0, 1)}
        print(f"{family}: {EXAMPLES[family]} examples, {outcomes}, "
              f"{'FAILED' if failure else 'ok'}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=40,
                        help="hypothesis examples per model family (default 40)")
    parser.add_argument("--out", default="hardening.json")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny models; one thread each
    t0 = time.perf_counter()
    rows = bad_input_rows()
    checked = [r for r in rows if r["ok"] is not None]
    print(f"bad input: {sum(r['ok'] for r in checked)}/{len(checked)} ok, "
          f"{len(rows) - len(checked)} skipped", flush=True)
    properties = property_runs(args.examples)
    payload = {
        "environment": environment(),
        "summary": {
            "cases": len(rows), "ok": sum(bool(r["ok"]) for r in rows),
            "skipped": len(rows) - len(checked),
            "hypothesis_examples": {f: p["examples"] for f, p in properties.items()},
            "property_failures": {f: p["failure"] for f, p in properties.items()
                                  if p["failure"]},
            "seconds": round(time.perf_counter() - t0, 1)},
        "bad_input": rows,
        "properties": properties,
        "bugs_fixed": BUGS_FIXED,
    }
    print(f"wrote {write(args.out, payload)}")


if __name__ == "__main__":
    main()
