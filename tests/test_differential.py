"""The differential harness's CI sample (``tests/differential.py``): 320 fixed instances
covering every model family and every case (the ``custom`` case's rules and objective
terms of one's own on every family), each explained by every installed solver
(HiGHS, CBC, Gurobi) and checked against the independent references; split into 10
chunks for pytest-xdist. Every counter must be zero. A failure message lists each
failing check with the line that reproduces it; ``python benchmarks/differential.py``
runs the same checks on thousands of instances.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from .differential import (
    CASES,
    COUNTERS,
    FAMILIES,
    Claim,
    available_solvers,
    check_claim,
    disagreements,
    evaluate,
    make_instance,
    reference_for,
    run_instance,
    summarize,
)
from .differential_custom import ExtraTerm, LinearRule, suitable
from .differential_instances import Instance, applicable_cases
from .differential_reference import codes

N_CHUNKS = 10
N_INSTANCES = 320
SOLVERS = available_solvers()


def sample(n: int = N_INSTANCES) -> list[tuple[int, str, str | None]]:
    """(seed, family, forced case): families in turn; per family, two natural instances
    then one forcing each case that applies to it, in turn."""
    out = []
    for seed in range(n):
        family = FAMILIES[seed % len(FAMILIES)]
        cases = (None, None, *applicable_cases(family))
        out.append((seed, family, cases[(seed // len(FAMILIES)) % len(cases)]))
    return out


SAMPLE = sample()


def test_sample_covers_every_family_and_case() -> None:
    assert {family for _, family, _ in SAMPLE} == set(FAMILIES)
    assert {case for _, _, case in SAMPLE} >= set(CASES)
    assert {family for _, family, case in SAMPLE if case == "custom"} == set(FAMILIES)
    assert len(SAMPLE) >= 300 and "highs" in SOLVERS


@pytest.mark.parametrize("chunk", range(N_CHUNKS))
def test_differential_chunk(chunk: int) -> None:
    records = []
    for seed, family, case in SAMPLE[chunk::N_CHUNKS]:
        record = run_instance(make_instance(seed, family, case), SOLVERS)
        assert case is None or case in record["cases"]
        records.append(record)
    summary = summarize(records)
    failing = {c: summary[c] for c in COUNTERS if summary[c]}
    lines = [f"{f['check']} seed={f['seed']} {f['family']} {f['solver']} {f['cases']}: "
             f"{f['detail'][:240]}\n    {f['repro']}" for f in summary["failures"][:20]]
    assert not failing, f"{failing} on {len(records)} instances:\n" + "\n".join(lines)


#: the instances of every finding (``benchmarks/differential_findings.py``): each showed a
#: false claim, a crash or a disagreement before its fix (built as they were then: without
#: the ``custom`` case's components)
FINDINGS = [(seed, None, None) for seed in (
    10, 11, 22, 25, 75, 92, 94, 106, 146, 205, 210, 298, 332, 380, 404, 457, 813, 1025,
    1058, 1129, 1169, 1191, 1198, 1205, 1215, 1232, 1285, 1398, 1409, 1424, 1426, 1442,
    1464, 1493, 1877, 1890, 2279, 2340, 2352, 2581, 2980, 3657, 4784, 4791, 5259, 526,
    946)] + [
    (116, "decision_tree", "near_threshold"), (7390, "mlp_regressor", None),
    (20044, "lightgbm", None), (21287, "gradient_boosting", None),
    (21184, "sklearn_mlp", None), (21235, "linear_regression", None),
    (30294, "mlp_regressor", None), (41771, "xgboost", None),
    (42656, "mlp_regressor", None), (52181, "torch_mlp", None),
    (62407, "xgboost", None), (72074, "sklearn_mlp", None),
    (75107, "linear_regression", None), (75149, "linear_regression", None),
    (75321, "linear_svm", None), (75232, "lightgbm", None), (95721, "torch_mlp", None)]


#: findings of full runs since the ``custom`` case (built with every case)
LATER_FINDINGS = [(162554, "logistic", None), (200408, "mlp_regressor", None)]


def test_later_findings_stay_fixed() -> None:
    """Seed 162554: HiGHS's presolve proved a one-change logistic query infeasible whose
    optimum CBC, Gurobi and brute force find (an integer feature of range 1e6). Seed
    200408: Gurobi, at its default feasibility tolerance 1e-6, proved 0.0137922 optimal
    on an MLP regressor over an input of magnitude 5e5 whose optimum 0.0137890 HiGHS and
    CBC find at the margin (its point overshot the margin by 7e-5)."""
    records = [run_instance(make_instance(seed, family, case), SOLVERS)
               for seed, family, case in LATER_FINDINGS]
    summary = summarize(records)
    assert not {c: summary[c] for c in COUNTERS if summary[c]}, summary["failures"][:3]


@pytest.mark.parametrize("half", range(2))
def test_findings_stay_fixed(half: int) -> None:
    records = [run_instance(make_instance(seed, family, case, later_cases=False), SOLVERS)
               for seed, family, case in FINDINGS[half::2]]
    summary = summarize(records)
    failing = {c: summary[c] for c in COUNTERS if summary[c]}
    assert not failing, f"{failing}: " + "; ".join(
        f"{f['check']} seed={f['seed']} {f['solver']}: {f['detail'][:200]}"
        for f in summary["failures"][:10])


def test_referee_flags_fabricated_claims() -> None:
    """Each check fires on a claim built to break it (the referee can fail)."""
    inst = next(i for i in (make_instance(s, "decision_tree") for s in range(4, 400, 14))
                if math.isfinite(reference_for(i, []).strict))
    ref = reference_for(inst, [])
    witness = inst.x.copy()
    for name, value in ref.witness.items():
        witness[name] = value
    checks = {
        "wrong_optimal": Claim("a", "optimal", 2 * ref.strict + 1, None, True, witness),
        "false_infeasible": Claim("a", "infeasible"),
        "unverified_returned": Claim("a", "feasible", 0.0, None, True, inst.x.copy()),
        "invalid_bound": Claim("a", "feasible", ref.strict, ref.strict + 1, True, witness),
        "crash": Claim("a", "crash", message="ValueError: boom"),
    }
    for check, claim in checks.items():
        problems, _ = check_claim(inst, ref, claim)
        assert check in {p["check"] for p in problems}, (check, problems)
    # the witness predicted as a target, its score short of a margin raised above it
    raised = dataclasses.replace(inst, margin=ref.witness_score + 1e-3)
    problems, _ = check_claim(raised, ref, Claim("a", "feasible", ref.strict, None, True,
                                                 witness))
    assert [p["check"] for p in problems] == ["margin_violations"], problems
    honest = Claim("a", "optimal", ref.strict, ref.strict, True, witness)
    assert check_claim(inst, ref, honest)[0] == []
    other = Claim("b", "optimal", ref.strict + 0.5, ref.strict + 0.5, True, witness)
    found = disagreements(inst, [honest, other], {"a": evaluate(inst, witness)})
    assert {d["kind"] for d in found} >= {"a point in P(mu+eps) cheaper than an OPTIMAL claim"}


def _held(seed: int) -> tuple[Instance, str] | None:
    """A decision tree's instance and a small discrete numeric feature its witness moves,
    which it can reach without moving (``None``: none)."""
    inst = make_instance(seed, "decision_tree", later_cases=False)
    ref = reference_for(inst, [])
    if not math.isfinite(ref.strict):
        return None
    x0 = inst.x.iloc[0]
    for f in suitable(inst):
        if not f.is_onehot and ref.witness[f.name] != x0[f.name]:
            inst.custom = [LinearRule("still", "declared", [(f.name, None, 1.0)], "==", 0.0,
                                      True)]
            if math.isfinite(reference_for(inst, []).strict):
                inst.custom = []
                return inst, f.name
            inst.custom = []
    return None


def _row(inst: Instance, values: dict) -> pd.DataFrame:
    row = inst.x.copy()
    for feature, value in values.items():
        row[feature] = value
    return row


def test_referee_reads_the_custom_components() -> None:
    """A custom term is part of the recomputed cost (a claim without it is flagged); a
    custom rule drops from the reference the points that break it and flags a returned
    one (never as the referee's own bug); the honest claims pass."""
    inst, name = next(found for found in map(_held, range(4, 800, 14)) if found is not None)
    plain = reference_for(inst, [])
    witness = _row(inst, plain.witness)
    f = inst.space[name]
    move = float(codes(f, witness[name])[0] - codes(f, inst.x[name])[0])
    inst.custom = [ExtraTerm("term", "raw", [("move", name, None, 0.5)])]
    ref = reference_for(inst, [])
    assert evaluate(inst, witness)["cost"] == pytest.approx(plain.strict + 0.5 * move)
    stale = Claim("a", "feasible", plain.strict, None, True, witness)
    assert "unverified_returned" in {p["check"] for p in check_claim(inst, ref, stale)[0]}
    honest = Claim("a", "feasible", plain.strict + 0.5 * move, None, True, witness)
    assert check_claim(inst, ref, honest)[0] == []
    inst.custom = [LinearRule("still", "declared", [(name, None, 1.0)], "==", 0.0, True)]
    ruled = reference_for(inst, [])
    assert plain.strict <= ruled.strict < math.inf
    assert ruled.witness[name] == inst.x.iloc[0][name]
    broken = Claim("a", "feasible", plain.strict, None, True, witness)
    found = {p["check"] for p in check_claim(inst, ruled, broken)[0]}
    assert "unverified_returned" in found and "harness_bug" not in found
    kept = Claim("a", "optimal", ruled.strict, ruled.strict, True, _row(inst, ruled.witness))
    assert check_claim(inst, ruled, kept)[0] == []
