"""Shared definitions of the claim regression tests (``test_claims*.py``): the
margin, gap and slack of every comparison, and helpers that never use cfopt to decide
what is true."""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest

import cfopt

MU = 1e-3   # cfopt's default validity margin (logit / score units)
GAP = 1e-4  # cfopt's default relative MIP gap
ABS = 1e-6  # absolute slack of every optimality comparison


def within_gap(objective: float, optimum: float, gap: float = GAP) -> bool:
    """``objective`` is no worse than ``optimum`` beyond the MIP gap."""
    return objective - optimum <= gap * abs(objective) + ABS


@contextlib.contextmanager
def solver_or_skip(solver: str):
    """Gurobi missing or refusing the model for its (size-limited) licence skips the
    test with that reason; it never fails it. Other solvers' errors propagate."""
    if solver == "gurobi":
        pytest.importorskip("gurobipy")
    try:
        yield
    except (cfopt.SolverLicenseError, cfopt.SolverNotAvailableError) as exc:
        if solver != "gurobi":
            raise
        pytest.skip(f"gurobi unavailable here: {exc}")


def explain_or_infeasible(explainer: cfopt.Explainer, x: pd.DataFrame, target):
    """The answer, or the InfeasibleError raised instead."""
    try:
        return explainer.explain(x, target=target)
    except cfopt.InfeasibleError as exc:
        return exc


def l1_costs(space: cfopt.FeatureSpace, rows: pd.DataFrame, x: pd.DataFrame) -> np.ndarray:
    """Range-weighted L1 distance of raw numeric rows from ``x`` (the default objective,
    weights 1 / data range of the declared space)."""
    weights = np.array([1.0 / f.weight_spread for f in space])
    delta = rows[space.names].to_numpy(float) - x[space.names].to_numpy(float)
    return np.abs(delta) @ weights
