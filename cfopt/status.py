"""Status of a counterfactual query."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Outcome of a solve, and of the verification that follows it.

    OPTIMAL: the solver proved optimality (within the requested MIP gap).
    FEASIBLE: a limit was hit; the incumbent is returned, not proven optimal.
    INFEASIBLE: the solver proved that no counterfactual satisfies the constraints.
    NO_SOLUTION: a limit was hit before any solution was found.
    ERROR: the solver failed (numerics, unbounded, unknown termination).
    VERIFICATION_FAILED: the solver's point is not classified as the target by the
        real model even after re-solving with larger margins; no CE is returned.
    INTERRUPTED: the batch was interrupted (Ctrl-C) before this query finished.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution"
    ERROR = "error"
    VERIFICATION_FAILED = "verification_failed"
    INTERRUPTED = "interrupted"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)
