"""Pyomo's persistent HiGHS interface, with its model updates batched
(:func:`persistent_highs`), for :class:`cfopt.solvers.highs.HighsBackend`."""

from __future__ import annotations

from typing import Any

from pyomo.common.collections import ComponentMap


def persistent_highs() -> Any:
    """Pyomo's persistent HiGHS interface, removing the columns a removal of
    constraints leaves unused once per call. Pyomo's own removes them once per
    removed constraint, and each time deletes them from HiGHS and renumbers every
    column left: quadratic in the model's size. A PROPLACE query drops its shifted
    copies' blocks and (``relax_model``) puts the model's network back: 33,301 such
    calls on Table 1's 50 COMPAS queries. A fixed variable stays a column with its
    bounds at its value: Pyomo's default treats it as a constant and removes and sends
    again every constraint it is in, at each fix and each unfix (the cutoff's linear
    pieces fix every ReLU binary of a master, :mod:`cfopt.query.incumbents`)."""
    from pyomo.contrib.solver.solvers.highs import Highs

    class MissFreeComponentMap(ComponentMap):  # type: ignore[misc, valid-type]
        """A ComponentMap whose ``pop`` of an absent key returns the default without
        raising inside: ComponentMap's ``__getitem__`` names the missing component in
        its KeyError, and Pyomo pops every removed constraint from its map of external
        functions, which holds none of cfopt's (a name costs tens of microseconds;
        10,499 removals on Adult's 50 Table 1 queries)."""

        def pop(self, key: Any, *default: Any) -> Any:
            if key in self or not default:
                return super().pop(key)
            return default[0]

    class BatchedRemovalHighs(Highs):  # type: ignore[misc, valid-type]
        _unused: dict[int, Any] | None = None
        _new_columns: list | None = None

        def __init__(self, **kwds: Any) -> None:
            super().__init__(**kwds)
            self._external_functions = MissFreeComponentMap()

        def add_constraints(self, cons: list) -> None:
            """Pyomo's, with the new variables of all ``cons`` sent to HiGHS as one batch
            of columns (Pyomo sends each constraint's own, one HiGHS call or two per
            constraint, even with none: 11,364 calls on Adult's 50 Table 1 queries)."""
            self._new_columns = []
            try:
                super().add_constraints(cons)
            finally:
                self._new_columns = None

        def _add_variables(self, variables: list) -> None:
            if self._new_columns is None:
                super()._add_variables(variables)
            else:
                self._new_columns.extend(variables)

        def _add_constraints(self, cons: list) -> None:
            if self._new_columns:
                new, self._new_columns = self._new_columns, []
                super()._add_variables(new)
            super()._add_constraints(cons)

        def remove_constraints(self, cons: list) -> None:
            self._unused = {}
            try:
                super().remove_constraints(cons)
            finally:
                unused, self._unused = self._unused, None
            if unused:
                super()._check_to_remove_vars(list(unused.values()))

        def _check_to_remove_vars(self, variables: list) -> None:
            if self._unused is None:
                super()._check_to_remove_vars(variables)
                return
            for v in variables:
                self._unused[id(v)] = v

    return BatchedRemovalHighs(
        treat_fixed_vars_as_params=False)  # pragma: no mutate (None: taken as False)
