"""The base of every declarative constraint a user composes into a counterfactual model.

A :class:`ConstraintBlock` is declared once by feature names and becomes a Pyomo
sub-block of the :class:`~cfopt.CounterfactualModel` named after it (``m.<name>``):

* :meth:`build` adds its variables and constraints to that block; it may read the
  model's feature variables ``m.x[f]``, ``m.onehot[f, l]``, ``m.x0``, ``m.onehot0``;
* :meth:`update` is called for every query after the factual is set, to change the
  block's mutable Params (so the model is never rebuilt);
* :meth:`violations` checks a decoded raw counterfactual row against the factual
  (never the solver's variables): every returned counterfactual passes it;
* :meth:`feature_intervals` (optional) confines decoding to where the block's own
  discrete choices hold (an embedded tree ensemble's split sides);
* :meth:`objective_term` (optional) returns a cost added to the distance minimised,
  and :meth:`cost` its exact value at a raw row;
* :meth:`network_copies` (optional) lists the copies of the model's network the block
  adds, which a restricted solve bounds over the points within a radius
  (:mod:`cfopt.query.ladder`);
* :attr:`needs_witness` (optional) says that the check reads the solver's values of the
  block's own variables (:class:`~cfopt.CustomConstraint`).

A cost must be bounded below over the variables' bounds for the speed paths to prune
(:meth:`~cfopt.constraints.raw.RawProblem.distance_radius`; an unbounded one leaves the
declared problem whole).

Each block is one constraint group for the infeasibility diagnosis.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import pandas as pd
import pyomo.environ as pyo

from ..space.space import FeatureSpace

if TYPE_CHECKING:
    from ..formulations.predictors import NetworkCopy
    from ..problem import CounterfactualModel

#: tolerance, relative to a feature's range, of checks on decoded raw points
CHECK_TOLERANCE = 1e-6


class ConstraintBlock(ABC):
    """A named, declarative constraint group (see the module docstring)."""

    #: default block name prefix; instances get ``name`` (unique within a model)
    kind: str = "constraint"
    #: True for a block that holds only what the current query set on it (a query's own
    #: narrowing): not a constraint of the user's problem beyond that query
    per_query: bool = False
    #: whether :meth:`violations` reads what the current query set (the model's factual
    #: or target, what :meth:`update` stored); False for a check that reads only its
    #: arguments (``factual``, ``row``) and the space, so that a group checks many rows
    #: without setting each as the factual (:mod:`cfopt.groups.declared`)
    check_reads_query: bool = True

    def __init__(self, name: str | None = None) -> None:
        if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"constraint name {name!r} must be a Python identifier")
        self.name = name

    def validate(self, space: FeatureSpace) -> None:
        """Raise ``ValueError`` naming the problem if the constraint does not fit
        ``space`` (unknown features, wrong kinds)."""

    @abstractmethod
    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        """Add the constraint's components to ``block`` (a sub-block of ``m``)."""

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        """Per-query hook, after ``m``'s factual (and target) are set."""

    def objective_term(self, m: CounterfactualModel, block: pyo.Block) -> object | None:
        """A cost the block adds to the distance minimised (``None``: none)."""
        return None

    def cost(self, m: CounterfactualModel, factual: pd.Series, row: pd.Series) -> float:
        """The value of :meth:`objective_term` at the raw ``row`` (exactly, not from
        the solver's variables)."""
        return 0.0

    def feature_intervals(self, m: CounterfactualModel,
                          block: pyo.Block) -> dict[str, tuple[float, float]]:
        """Per numeric feature, the code interval where the block's own discrete choices
        in the solver's solution hold exactly (e.g. the split sides of an embedded tree
        ensemble); decoding moves the solver's point into it. None by default."""
        return {}

    @property
    def needs_witness(self) -> bool:
        """Whether :meth:`violations` and :meth:`cost` read the solver's values of the
        block's own variables (a witness that the point is a solution of the MILP with
        the block), so that they hold only on a solver's point: a heuristic point is then
        never taken for a point of the declared problem. False by default: a block
        checks the raw row alone."""
        return False

    def network_copies(self, m: CounterfactualModel) -> list[NetworkCopy]:
        """The copies of the model's network the block adds to ``m``, each with the model
        inputs it sees when the counterfactual changes no feature (``None``: the
        counterfactual's own), so that a restricted solve can bound them over the
        points within a radius
        (:func:`~cfopt.query.restrictions.relu.copies_within_radius`). None by
        default."""
        return []

    @abstractmethod
    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        """Messages for each way the raw ``row`` breaks the constraint."""


def check_features(space: FeatureSpace, names: list[str], what: str, *,
                   numeric: bool = False) -> None:
    """``ValueError`` for unknown feature names (or categorical ones when ``numeric``)."""
    for name in names:
        if name not in space.names:
            raise ValueError(f"{what}: unknown feature {name!r}; the feature space has "
                             f"{space.names}")
        if numeric and space[name].is_onehot:
            raise ValueError(f"{what}: feature {name!r} is categorical; use its levels "
                             f"(name, level) or a category rule instead")


def code_change(space: FeatureSpace, name: str, factual: pd.Series, row: pd.Series) -> float:
    """Change of a numeric feature's code from the factual to ``row``."""
    f = space[name]
    return f.to_code(row[name]) - f.to_code(factual[name])


def tolerance(space: FeatureSpace, name: str) -> float:
    f = space[name]
    return CHECK_TOLERANCE * max(1.0, f.upper - f.lower) if not f.is_onehot else 1e-9
