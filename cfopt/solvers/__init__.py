"""Solver backends: ``make_solver("highs" | "gurobi" | "cbc" | <pyomo name>)``."""

from .backends import GurobiBackend, HighsBackend, LegacyBackend, make_solver
from .base import SolveOutcome, SolverBackend, SolverSettings

__all__ = ["GurobiBackend", "HighsBackend", "LegacyBackend", "SolveOutcome", "SolverBackend",
           "SolverSettings", "make_solver"]
