"""Shared fixtures: data, small trained models, helpers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import cfopt

IN_CI = os.environ.get("CI", "").lower() == "true"

# one torch thread per test process: pytest-xdist already runs one process per core, and
# torch's default threads oversubscribe them (tiny trainings ran ~100x slower under load)
torch.set_num_threads(1)


def carla_or_skip(loader, **kwargs):
    """Load a CARLA data set from CFOPT_DATA_HOME; in CI a missing file is a failure."""
    try:
        return loader(download=False, **kwargs)
    except cfopt.DataNotFoundError:
        if IN_CI:
            raise
        pytest.skip("CARLA data not in CFOPT_DATA_HOME (set it to ../shared/data)")


def train_torch(Z: np.ndarray, y: np.ndarray, hidden=(16, 16), n_classes: int = 2,
                epochs: int = 150, seed: int = 0, final: torch.nn.Module | None = None
                ) -> torch.nn.Sequential:
    """A small ReLU MLP trained full-batch with Adam (deterministic)."""
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    width = Z.shape[1]
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    out = 1 if n_classes == 2 else n_classes
    layers.append(torch.nn.Linear(width, out))
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    Zt = torch.tensor(Z, dtype=torch.float32)
    for _ in range(epochs):
        opt.zero_grad()
        logits = net(Zt)
        if out == 1:
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits.squeeze(1), torch.tensor(y, dtype=torch.float32))
        else:
            loss = torch.nn.functional.cross_entropy(logits, torch.tensor(y, dtype=torch.long))
        loss.backward()
        opt.step()
    if final is not None:
        net.append(final)
    return net.eval()


def noisy_grid() -> tuple[pd.DataFrame, np.ndarray]:
    """Noisy labels on a 10 x 8 x 3 x 4 grid (integers a, b, d; categorical c): deep
    trees fit their noise."""
    rng = np.random.default_rng(3)
    n = 1200
    frame = pd.DataFrame({"a": rng.integers(0, 10, n), "b": rng.integers(0, 8, n),
                          "c": rng.choice(["red", "green", "blue"], n),
                          "d": rng.integers(0, 4, n)})
    score = (0.5 * frame["a"] - 0.6 * frame["b"] + 1.5 * (frame["c"] == "red")
             - 0.8 * frame["d"])
    return frame, (score + rng.normal(0, 1.5, n) > 0).astype(int).to_numpy()


def mixed_data(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Raw rows with numeric, integer and categorical features and a label that depends
    on all of them (for the model-agnostic baselines' tests)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({
        "income": rng.uniform(10, 100, n).round(1),
        "age": rng.integers(18, 70, n),
        "debt": rng.uniform(0, 50, n).round(2),
        "housing": rng.choice(["rent", "own", "free"], n),
        "married": rng.choice(["no", "yes"], n),
    })
    score = (X.income - 55) / 20 - (X.debt - 25) / 10 + (X.housing == "own") * 0.8 \
        + (X.age - 40) / 30
    return X, (score > 0).astype(int).to_numpy()


def export_onnx(net: torch.nn.Module, n_inputs: int, path: Path, dynamic: bool = True) -> Path:
    kwargs = {"dynamic_axes": {"x": {0: "batch"}}} if dynamic else {}
    torch.onnx.export(net, (torch.zeros(1, n_inputs),), str(path), dynamo=False,
                      input_names=["x"], output_names=["y"], **kwargs)
    return path


@pytest.fixture(autouse=True)
def python_sigint():
    """Every test starts with Python's own Ctrl-C handler, as a user's process has. In
    the full suite under pytest-xdist a worker was found with SIGINT ignored before any
    of its tests ran (not set by a test body nor a module import: a fixture's teardown,
    source not yet found), and the Ctrl-C tests failed or passed by which tests their
    worker had run before."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


@pytest.fixture(scope="session")
def german():
    data = cfopt.datasets.load_german()
    return data


def german_space(data) -> cfopt.FeatureSpace:
    space = cfopt.FeatureSpace.from_frame(data.X)
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    return space


@pytest.fixture(scope="session")
def german_model(german):
    space = german_space(german)
    net = train_torch(space.transform(german.X), german.y.to_numpy(), hidden=(10, 10))
    return net, space


@pytest.fixture(scope="session")
def toy():
    """A small mixed feature space whose whole grid can be enumerated."""
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame({
        "a": rng.integers(0, 5, n),                       # integer 0..4
        "b": rng.integers(0, 4, n),                       # integer 0..3
        "c": rng.choice(["red", "green", "blue"], n),     # categorical
        "d": rng.integers(0, 2, n),                       # binary
    })
    score = frame["a"] - 1.5 * frame["b"] + (frame["c"] == "red") * 2 - frame["d"]
    y = (score + rng.normal(0, 1, n) > 0.5).astype(int).to_numpy()
    return frame, y


def grid(space: cfopt.FeatureSpace) -> pd.DataFrame:
    """Every point of a small all-discrete feature space."""
    axes = []
    for f in space:
        if f.is_onehot:
            axes.append(list(f.categories))
        else:
            axes.append([f.from_code(v) for v in range(int(f.lower), int(f.upper) + 1)])
    mesh = np.array(np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij"))
    idx = mesh.reshape(len(axes), -1).T
    return pd.DataFrame({f.name: [axes[k][i] for i in idx[:, k]]
                         for k, f in enumerate(space)})


def logit_valid_grid_points(explainer: cfopt.Explainer, x: pd.DataFrame, target_index: int,
                            space: cfopt.FeatureSpace, margin: float) -> pd.DataFrame:
    """The grid points whose target logit beats the others (or 0) by ``margin``, with no
    constraint checked yet. Sets the factual."""
    points = grid(space)
    m = explainer.milp
    m.set_factual(x)
    adapter = m.adapter
    logits = adapter.structure.logits(space.transform(points, check_bounds=False))
    if adapter.decision == "sign":
        sign = 1.0 if target_index == 1 else -1.0
        valid = sign * logits[:, 0] >= margin
    else:
        others = np.delete(logits, target_index, axis=1)
        valid = (logits[:, target_index][:, None] - others >= margin).all(axis=1)
    return points[valid].reset_index(drop=True)


def valid_grid_points(explainer: cfopt.Explainer, x: pd.DataFrame, target_index: int,
                      space: cfopt.FeatureSpace, margin: float) -> list[pd.DataFrame]:
    """Every grid point a counterfactual of ``x`` may be under the MILP's definition:
    the target logit beats the others (or 0) by ``margin``, and no declared constraint
    (actionability, cap, constraint blocks) is violated. Sets the factual."""
    points = logit_valid_grid_points(explainer, x, target_index, space, margin)
    rows = [points.iloc[[k]].reset_index(drop=True) for k in range(len(points))]
    return [row for row in rows if not explainer.milp.violations(row)]


def grid_norms(m, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Weighted L1, L0 and weighted L∞ distances of many raw rows from the factual at
    once (the vectorised ``m.distances``, written independently of it)."""
    space, weights = m.space, m.weights
    Z, z0 = space.transform(rows, check_bounds=False), space.transform(m.factual)[0]
    parts = []
    for f, sl in zip(space, space.input_slices().values()):
        if f.is_onehot:
            parts.append(np.abs(Z[:, sl] - z0[sl]).max(axis=1))
        else:
            parts.append(np.abs(Z[:, sl.start] - z0[sl.start]) * f.scale)
    D = np.column_stack(parts) if parts else np.zeros((len(rows), 0))
    w = np.array([weights[f.name] for f in space])
    return {"l1": (D * w).sum(axis=1), "l0": (D > 0).sum(axis=1).astype(float),
            "linf": (D * w).max(axis=1, initial=0.0)}


def sample_rows(space: cfopt.FeatureSpace, n: int, seed: int = 0) -> pd.DataFrame:
    """Uniform random raw rows of a feature space (inside its bounds)."""
    rng = np.random.default_rng(seed)
    data = {}
    for f in space:
        if f.is_onehot:
            data[f.name] = [f.categories[k] for k in rng.integers(0, len(f.categories), n)]
        elif f.is_integral:
            data[f.name] = [f.from_code(v) for v in rng.integers(int(f.lower), int(f.upper) + 1, n)]
        else:
            data[f.name] = rng.uniform(f.lower, f.upper, n)
    return pd.DataFrame(data, columns=space.names)


def rows_on_thresholds(trees, X: np.ndarray) -> np.ndarray:
    """Rows of ``X`` (in turn) with one column moved onto each split threshold of
    ``trees`` (the ``Tree`` objects of a parsed ensemble)."""
    rows = []
    for tree in trees:
        for f, t in zip(tree.feature, tree.threshold):
            if f >= 0:
                row = X[len(rows) % len(X)].copy()
                row[f] = t
                rows.append(row)
    return np.array(rows)
