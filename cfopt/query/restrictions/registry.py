"""The registry of per-query restrictions, by the class of the predictor block (see
:mod:`cfopt.query.restrictions`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from ...formulations.predictors import NetworkCopy, PredictorConstr
    from ...problem import CounterfactualModel


@dataclass(frozen=True)
class Restricted:
    """A restriction in place while ``context`` is entered; ``rebuilt``: the predictor's
    block was built anew for the query (a persistent solver must reload the model)."""

    context: AbstractContextManager[None]
    rebuilt: bool = False


class Restriction(ABC):
    """How one predictor kind restricts a query around a heuristic counterfactual."""

    #: :meth:`within_radius` restricts without a heuristic point
    by_radius: bool = False

    def applies(self, m: CounterfactualModel) -> bool:
        """Whether ``m`` can be restricted at all (else no heuristic is sought)."""
        return True

    @abstractmethod
    def heuristic(self, m: CounterfactualModel) -> pd.DataFrame | None:
        """A greedy counterfactual of the query (a raw row), or ``None``."""

    @abstractmethod
    def restrict(self, m: CounterfactualModel, candidate: pd.DataFrame | None, radius: float,
                 details: dict[str, Any], deadline: float, verified: bool) -> Restricted | None:
        """The restriction to the points of objective at most ``radius`` (``inf``:
        actionability only) around ``candidate`` (``verified``: the real model verified
        a heuristic point of the query), or ``None``; what it did goes into ``details``;
        anything built must be done by ``deadline``."""

    def whole(self, m: CounterfactualModel, details: dict[str, Any], deadline: float) -> bool:
        """Make ``m`` the declared problem whole again after restricted solves (by
        ``deadline``); whether the predictor's block was built anew (a persistent solver
        must reload the model). Nothing to do by default: restrictions are undone on
        leaving their context."""
        return False

    def within_radius(self, m: CounterfactualModel, radius: float, details: dict[str, Any],
                      support: Collection[str] | None = None, copies: Sequence[NetworkCopy] = ()
                      ) -> AbstractContextManager[None] | None:
        """The restriction to the points of objective at most ``radius`` with no
        heuristic point (a solve up a ladder of radii, :mod:`cfopt.query.ladder`) that
        change only features of ``support`` (default: any; :mod:`cfopt.query.supports`),
        of the model, the copies of it the declared blocks add and ``copies`` (e.g. a
        cutting-set adversary's), or ``None`` when this kind has none (:attr:`by_radius`
        false)."""
        return None


RESTRICTIONS: dict[type, Restriction] = {}


def register_restriction(constr_class: type[PredictorConstr], restriction: Restriction
                         ) -> None:
    """Restrict the queries of models whose predictor block is a ``constr_class``."""
    RESTRICTIONS[constr_class] = restriction


def restriction_of(m: CounterfactualModel) -> Restriction | None:
    """The restriction registered for ``m``'s predictor block (by class, most specific
    first), or ``None``."""
    for klass in type(m.predictor_constr).__mro__:
        if klass in RESTRICTIONS:
            return RESTRICTIONS[klass]
    return None

