"""The robust harness's CI sample (``tests/differential_robust.py``): 140 fixed
instances, 20 per robust method (PROPLACE and Δ+K with their speed levers on and off),
checked against the exact oracles of ``tests/robust_oracles.py``; every counter must be
zero. ``python benchmarks/differential.py --robust 1000`` runs the same checks on more.
Also: the oracles against cfopt's exact adversary and sampled shifted models, and the
referee against fabricated claims (each check can fail)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

import cfopt
from cfopt.methods import RobustnessChecker

from .differential_robust import (
    COUNTERS,
    METHODS,
    RobustClaim,
    check_claim,
    make_robust_instance,
    reference_for,
    run_robust_instance,
    solve,
    summarize_robust,
)
from .robust_oracles import delta_worst, k_neighbourhood, parameters, sampled_worst, setback

N_CHUNKS = 4
SEEDS = list(range(140))


@pytest.mark.parametrize("chunk", range(N_CHUNKS))
def test_robust_differential_chunk(chunk: int) -> None:
    records = [run_robust_instance(make_robust_instance(seed))
               for seed in SEEDS[chunk::N_CHUNKS]]
    summary = summarize_robust(records)
    lines = [f"{f['check']} seed {f['seed']} {f['method']} ({f['run']}): {f['detail']}\n"
             f"    {f['repro']}" for f in summary["failures"]]
    assert all(summary[c] == 0 for c in COUNTERS), "\n".join(lines)


def test_sample_covers_every_method_and_outcome() -> None:
    instances = [make_robust_instance(seed) for seed in SEEDS]
    assert {i.method for i in instances} == set(METHODS)
    assert {i.n_logits for i in instances} == {1, 3}
    assert {len(i.params) for i in instances} == {2, 3}  # one and two hidden layers
    assert any(f.perturbation is not None and f.perturbation.kind == "relative"
               and f.lower < 0 for i in instances for f in i.space)


@pytest.mark.parametrize("seed", range(6))
def test_the_delta_oracle_is_the_exact_adversary(seed: int) -> None:
    """The closed form equals cfopt's exact adversary MILP, and no sampled shifted
    network goes below it (one and two hidden layers, one logit and three)."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    sizes = [3, 4, *([3] if seed % 2 else []), 1 if seed % 3 else 3]
    layers: list[torch.nn.Module] = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1]).double()
    params, delta = parameters(net), 0.05
    checker = RobustnessChecker(net, delta)
    Z = rng.uniform(-1, 2, (3, 3))
    for target in range(2 if sizes[-1] == 1 else 3):
        worst = delta_worst(params, Z, delta, target)
        for i, z in enumerate(Z):
            assert checker.exact(z, target).bound == pytest.approx(worst[i], abs=1e-6)
            assert sampled_worst(params, z, delta, target, rng, 100) >= worst[i] - 1e-9


def test_the_k_and_setback_oracles_on_a_hand_example() -> None:
    space = cfopt.FeatureSpace.from_frame(pd.DataFrame({"a": [-4, 4], "b": [0, 3]}),
                                          kinds={"a": "integer", "b": "integer"})
    space.set("a", perturbation=cfopt.Perturbation.relative(increase=0.5, decrease=0.25))
    space.set("b", perturbation=cfopt.Perturbation.absolute(increase=1, decrease=2))
    features = list(space)
    # a kept at -3: [-3 - 0.75, -3 + 1.5] -> -3..-2 (integral, inwards); b changed: fixed
    assert k_neighbourhood(features, {"a": -3, "b": 0}, {"a": -3, "b": 2}) == [
        {"a": -3, "b": 2}, {"a": -2, "b": 2}]
    # a raised -3 -> -2: pushed back by min(0.25 |-2|, 1) = 0.5; b lowered 2 -> 0: by 1
    weights = {"a": 1.0, "b": 2.0}
    assert setback(features, weights, {"a": -3, "b": 2}, {"a": -2, "b": 0}) == 0.5 + 2.0


@pytest.fixture(scope="module")
def certified_proplace():
    seed = next(s for s in range(0, 700, 7) if (inst := make_robust_instance(s, "proplace"))
                and (c := solve(inst)).status == "certified" and c.optimal)
    inst = make_robust_instance(seed, "proplace")
    claim = solve(inst)
    return inst, claim, reference_for(inst, claim.region)


def _checks(inst, ref, claim: RobustClaim) -> set[str]:
    return {p["check"] for p in check_claim(inst, ref, claim)}


def test_referee_flags_fabricated_delta_claims(certified_proplace) -> None:
    inst, claim, ref = certified_proplace
    assert _checks(inst, ref, claim) == set()
    # a declared point outside Δ-robustness, certified
    bad = int(np.flatnonzero(ref.declared & (ref.worst < -1e-3))[0])
    row = ref.rows.iloc[bad].to_dict()
    fake = dataclasses.replace(claim, row=row, objective=float(ref.cost[bad]), optimal=False)
    assert "false_certificate" in _checks(inst, ref, fake)
    # a bound above the exact worst case
    fake = dataclasses.replace(claim, delta_bound=claim.delta_bound + 1.0)
    assert _checks(inst, ref, fake) == {"false_certificate"}
    # optimal, but dearer than the cheapest point robust at σ
    fake = dataclasses.replace(claim, objective=claim.objective + 1.0)
    assert "robust_wrong_optimal" in _checks(inst, ref, fake)
    # infeasible while a point robust at σ exists
    fake = RobustClaim("levers_on", "infeasible", master_margin=inst.sigma)
    assert _checks(inst, ref, fake) == {"robust_false_infeasible"}
    # a misreported objective; a margin that is none of σ, σ - t, t/100
    assert _checks(inst, ref, dataclasses.replace(claim, objective=claim.objective + 1e-3)) \
        >= {"robust_unverified"}
    assert _checks(inst, ref, dataclasses.replace(claim, master_margin=0.5 * inst.sigma)) \
        == {"robust_unverified"}


def test_referee_flags_a_false_k_certificate() -> None:
    inst, claim = next((i, c) for s in range(3, 700, 7) if (i := make_robust_instance(s, "k"))
                       and (c := solve(i)).status == "certified")
    ref = reference_for(inst, None)
    assert _checks(inst, ref, claim) == set()
    flipped = np.flatnonzero(ref.declared & (ref.score > 1e-3) & (ref.k_least < -1e-3))
    if not len(flipped):
        pytest.skip("no valid point with a flipping K-perturbation in this instance")
    i = int(flipped[0])
    fake = dataclasses.replace(claim, row=ref.rows.iloc[i].to_dict(),
                               objective=float(ref.cost[i]), optimal=False)
    assert "false_certificate" in _checks(inst, ref, fake)
