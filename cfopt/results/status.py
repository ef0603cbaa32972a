"""Status of a counterfactual query."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Outcome of a solve, and of the verification that follows it.

    * ``OPTIMAL``: a proof about the declared problem (the real model's prediction with the
      validity margin, the space, actionability, constraints and objective): the
      returned point is verified and no admissible point is cheaper than
      ``bound``, which is within the requested MIP gap (plus 1e-6) of its objective
      (:mod:`cfopt.query.claims`).
    * ``FEASIBLE``: a verified point without that proof (a limit was hit, or the point
      needed a larger margin, or the solver's bound is too far); ``bound`` is still
      a valid lower bound.
    * ``INFEASIBLE``: the solver proved that no point satisfies the declared problem.
    * ``NO_SOLUTION``: a limit was hit before any solution was found.
    * ``ERROR``: the solver failed (numerics, unbounded, unknown termination).
    * ``VERIFICATION_FAILED``: the solver's point is not classified as the target by the
      real model even after re-solving with larger margins; no CE is returned.
    * ``INTERRUPTED``: the batch was interrupted (Ctrl-C) before this query finished.
    * ``ALREADY_TARGET``: the factual itself is already classified as a target (or its
      prediction lies in the target interval): no counterfactual is needed.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution"
    ERROR = "error"
    VERIFICATION_FAILED = "verification_failed"
    INTERRUPTED = "interrupted"
    ALREADY_TARGET = "already_target"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)
