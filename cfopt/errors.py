"""Exceptions raised by cfopt.

Every error names what was wrong (column, feature, option, model part, solver) so
that a user can fix the input without reading cfopt's source.
"""

from __future__ import annotations


class CfoptError(Exception):
    """Base class of cfopt's own exceptions."""


class UnsupportedModelError(CfoptError, TypeError):
    """The learned model (or one of its layers / steps) cannot be encoded exactly."""


class SolverError(CfoptError, RuntimeError):
    """The solver failed in a way that is not a property of the problem."""


class SolverNotAvailableError(SolverError):
    """The requested solver is not installed; the message says how to install it."""


class SolverLicenseError(SolverError):
    """The solver refused the model because of its licence (e.g. size-limited Gurobi)."""


class ModelChangedError(CfoptError, RuntimeError):
    """The learned model changed (its parameters were edited or it was refitted) after
    the counterfactual MILP was built from it: answers would be about the old model."""


class AlreadyTargetError(CfoptError, ValueError):
    """The factual is already classified as a target (or predicted inside the target
    interval): there is nothing to explain. In a batch, such a row gets the status
    ``ALREADY_TARGET``."""


class InfeasibleError(CfoptError, ValueError):
    """No counterfactual satisfies the declared constraints.

    ``groups`` lists the names of the constraint groups whose relaxation restores
    feasibility (the diagnosis); ``details`` maps a group to its conflicting members.
    """

    def __init__(self, message: str, groups: list[str] | None = None,
                 details: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.groups = list(groups or [])
        self.details = dict(details or {})


class DataNotFoundError(CfoptError, FileNotFoundError):
    """A data set is neither in the data home nor downloadable."""
