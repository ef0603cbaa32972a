"""Random, seeded instances of the robust harness (``tests/differential_robust.py``): a
tiny random ReLU network (one or two hidden layers; one logit, or three), two or
three integer features on small grids (some with negative values), data rows on the
grid, immutable and increase-only features, perturbation annotations (absolute and
relative), explicit L1 weights, and a robust method with its options."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

import cfopt

from .robust_oracles import Parameters, delta_worst, logits, parameters

METHODS = ("proplace", "milp-r", "rnce", "k", "ck", "c", "delta+k")
#: the methods with a Δ claim, a K claim, a plausible region
DELTA_METHODS = frozenset({"proplace", "milp-r", "rnce", "delta+k"})
K_METHODS = frozenset({"k", "ck", "delta+k"})
SETBACK_METHODS = frozenset({"c", "ck"})
N_ROWS = 40
TIME_LIMIT = 30.0
#: the Explainer's default validity margin (the K masters' margin)
EXPLAINER_MARGIN = 1e-3


@dataclass
class RobustInstance:
    """One robust query: the method, its options and the declared problem."""

    seed: int
    method: str
    solver: str
    frame: pd.DataFrame  # data rows (the region's and RNCE's candidates)
    space: cfopt.FeatureSpace
    net: torch.nn.Sequential
    params: Parameters
    x: pd.DataFrame
    target: int  # the class label (= its index)
    delta: float
    sigma: float
    tolerance: float
    k: int
    weights: dict[str, float]
    max_changes: int | None
    setback: bool = False  # delta+k: the C-setback cost in the objective
    region: bool = True  # delta+k: with the plausible region
    ladder_gate_off: bool = False  # every master climbs the ladder (``gate_off``)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def n_logits(self) -> int:
        return self.params[-1][0].shape[0]

    def describe(self) -> dict[str, Any]:
        return {"seed": self.seed, "method": self.method, "solver": self.solver,
                "hidden": [int(W.shape[0]) for W, _ in self.params[:-1]],
                "logits": self.n_logits, "target": self.target, "delta": self.delta,
                "sigma": self.sigma, "tolerance": self.tolerance, "k": self.k,
                "max_changes": self.max_changes, "setback": self.setback,
                "region": self.region, "ladder_gate_off": self.ladder_gate_off,
                "weights": self.weights,
                "factual": {k: int(v) for k, v in self.x.iloc[0].items()},
                "features": [f"{f.name}:[{f.lower},{f.upper}]"
                             f"{'/immutable' if f.immutable else ''}"
                             f"{'' if f.direction == 'any' else '/' + f.direction}"
                             f"{'' if f.perturbation is None else '/' + str(f.perturbation.to_dict())}"
                             for f in self.space]}


def make_robust_instance(seed: int, method: str | None = None,
                         solvers: tuple[str, ...] = ("highs", "cbc", "gurobi")
                         ) -> RobustInstance:
    """The instance of ``seed`` (``method``: by default the seed's turn in
    :data:`METHODS`; the solver is drawn among ``solvers``)."""
    method = method or METHODS[seed % len(METHODS)]
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; methods are {METHODS}")
    for attempt in range(50):
        inst = _attempt(seed, method, solvers, np.random.default_rng([seed, 0x7, attempt]))
        if inst is not None:
            inst.notes["attempt"] = attempt
            return inst
    raise RuntimeError(f"no robust instance for seed {seed}, method {method!r}")


def _attempt(seed: int, method: str, solvers: tuple[str, ...],
             rng: np.random.Generator) -> RobustInstance | None:
    d = int(rng.integers(2, 4))
    lows = rng.integers(-2, 1, d)
    spans = rng.integers(2, 5, d)
    names = [f"f{i}" for i in range(d)]
    rows = np.column_stack([rng.integers(lo, lo + s + 1, N_ROWS) for lo, s in zip(lows, spans)])
    rows[0], rows[1] = lows, lows + spans  # the bounds are the grid's corners
    frame = pd.DataFrame(rows, columns=names)
    space = cfopt.FeatureSpace.from_frame(
        frame, scaling=str(rng.choice(["minmax", "none", "standard"])),
        kinds=dict.fromkeys(names, "integer"))
    for name in names:
        u = rng.random()
        if u < 0.15:
            space.immutable(name)
        elif u < 0.3:
            space.increase_only(name)
        if method in {"k", "ck", "c", "delta+k"} and rng.random() < 0.7:
            space.set(name, perturbation=_perturbation(rng))
    if all(f.immutable for f in space):
        return None
    n_logits = 3 if rng.random() < 0.35 else 1
    net = _network(space.transform(grid(space)), d, n_logits, rng)
    params = parameters(net)
    Z = space.transform(frame)
    out = logits(params, Z)
    classes = (out[:, 0] > 0).astype(int) if n_logits == 1 else out.argmax(axis=1)
    if len(np.unique(classes)) < (2 if n_logits == 1 else 3):
        return None
    i = int(rng.integers(N_ROWS))
    if np.min(np.abs(out[i] if n_logits == 1 else np.diff(np.sort(out[i])[-2:]))) < 1e-6:
        return None  # the factual on the decision boundary: its class is float noise
    x = frame.iloc[[i]].reset_index(drop=True)
    others = [c for c in range(max(2, n_logits)) if c != classes[i]]
    solver = str(rng.choice(solvers))
    solver = solver if cfopt.solvers.make_solver(solver).available() else "highs"
    sigma = float(rng.choice([0.01, 0.05]))
    target = int(rng.choice(others))
    half = _half_robust_delta(params, Z[classes == target], target)
    return RobustInstance(
        seed, method, solver, frame, space, net, params, x, target,
        delta=half * float(rng.choice([0.25, 0.5, 1.0, 1.5])), sigma=sigma,
        tolerance=sigma * float(rng.choice([0.2, 0.5])), k=int(rng.integers(2, 9)),
        weights={n: float(rng.choice([0.25, 0.5, 1.0])) for n in names},
        max_changes=None if method == "rnce" else [None, None, 1, 2][int(rng.integers(4))],
        setback=bool(rng.random() < 0.5), region=bool(rng.random() < 0.6),
        ladder_gate_off=bool(rng.random() < 0.3))


def _half_robust_delta(params: Parameters, Z: np.ndarray, target: int) -> float:
    """The largest δ of a doubling scale at which half the target's data rows are still
    Δ-robust (the instance's δ is drawn around it, so that some points are robust)."""
    delta = 1e-3
    while delta < 1.0 and np.mean(delta_worst(params, Z, 2 * delta, target) >= 0) >= 0.5:
        delta *= 2
    return delta


def _perturbation(rng: np.random.Generator) -> cfopt.Perturbation:
    if rng.random() < 0.6:
        return cfopt.Perturbation.absolute(increase=int(rng.integers(0, 3)),
                                           decrease=int(rng.integers(0, 3)))
    return cfopt.Perturbation.relative(increase=float(rng.choice([0.0, 0.25, 0.5])),
                                       decrease=float(rng.choice([0.0, 0.25, 0.5])))


def _network(Z: np.ndarray, d: int, n_logits: int,
             rng: np.random.Generator) -> torch.nn.Sequential:
    """A random float64 ReLU network whose outputs split the grid between the classes."""
    torch.manual_seed(int(rng.integers(2**31)))
    hidden = [int(rng.integers(2, 5))]
    if rng.random() < 0.5:
        hidden.append(int(rng.integers(2, 4)))
    layers: list[torch.nn.Module] = []
    width = d
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, n_logits)).double()
    net.eval()
    with torch.no_grad():
        out = net(torch.tensor(Z, dtype=torch.float64))
        net[-1].bias -= out.median(dim=0).values
    return net


def grid(space: cfopt.FeatureSpace) -> pd.DataFrame:
    """Every point of the feature box (integer features)."""
    axes = [range(int(f.lower), int(f.upper) + 1) for f in space]
    return pd.DataFrame(list(itertools.product(*axes)), columns=space.names)

