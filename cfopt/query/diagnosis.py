"""Infeasibility diagnosis: which constraint groups stop a counterfactual from existing.

When the composed problem is infeasible, each relaxable group — the actionability
groups (``immutable``, ``increase_only``, ``decrease_only``, ``max_changes``) and every
constraint component or block the user added — is deactivated in turn and the
problem re-solved. A group whose relaxation restores feasibility conflicts with the
target; within it, a deletion filter finds a minimal set of members (e.g. the
immutable features) whose relaxation suffices. If no single group suffices, all
groups are relaxed together and a deletion filter over groups finds a minimal
jointly conflicting set; if even relaxing all is infeasible, the target is
unreachable inside the feature bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyomo.environ as pyo

from ..problem import ACTIONABILITY_GROUPS, CounterfactualModel
from ..results.status import Status
from ..solvers import SolverBackend, SolverSettings, make_solver

#: largest group whose members are examined one by one
MAX_MEMBERS = 40


@dataclass
class Diagnosis:
    """Conflicting constraint groups of an infeasible problem.

    ``groups``: names of the groups found; ``joint``: they conflict only together
    (otherwise relaxing any one of them suffices); ``members``: per group, a minimal
    set of its members whose relaxation suffices; ``unreachable``: no point in the
    feature box reaches the target; ``undecided``: a probe hit its time limit;
    ``inconsistent``: re-solved with nothing relaxed, the problem was feasible (the
    solver's infeasibility claim did not reproduce).
    """

    groups: list[str] = field(default_factory=list)
    members: dict[str, list[str]] = field(default_factory=dict)
    joint: bool = False
    unreachable: bool = False
    undecided: bool = False
    inconsistent: bool = False

    def message(self, target: str) -> str:
        """The error message; ``target`` describes the goal (e.g. ``"be classified as
        [1]"``, as :meth:`CounterfactualModel.describe_target` gives it)."""
        head = f"no counterfactual can {target}"
        if self.unreachable:
            return (f"{head}: no point inside the feature bounds reaches the target, even "
                    f"with every actionability and user constraint relaxed; widen the "
                    f"bounds (space.set(name, lower=..., upper=...)) or change the target")
        if self.inconsistent:
            return (f"{head}: the solver reported the problem infeasible, but re-solving it "
                    f"unchanged found a solution (numerical trouble); try another solver")
        if not self.groups:
            return (f"{head} under the declared constraints (proven by the solver); the "
                    f"diagnosis could not isolate the conflicting group within its time limit")
        described = []
        for g in self.groups:
            members = self.members.get(g)
            described.append(f"{g!r} (relax {', '.join(repr(m) for m in members)})"
                             if members else repr(g))
        if self.joint:
            return (f"{head}: the constraint groups {', '.join(described)} jointly conflict "
                    f"with the target; relaxing all of them makes the problem feasible")
        if len(described) == 1:
            return (f"{head}: the constraint group {described[0]} conflicts with the target; "
                    f"relaxing it makes the problem feasible")
        return (f"{head}: each of the constraint groups {', '.join(described)} conflicts "
                f"with the target; relaxing any one of them makes the problem feasible")


def relaxable_groups(m: CounterfactualModel) -> dict[str, pyo.Component]:
    """Actionability groups in use and the user's own constraint components / blocks."""
    groups = {}
    for name in ACTIONABILITY_GROUPS:
        comp = m.component(name)
        if comp is not None and comp.active and any(True for _ in _members(comp)):
            groups[name] = comp
    for comp in m.user_components():
        groups[comp.local_name] = comp
    return groups


def _members(component: pyo.Component) -> Iterator[tuple[str, pyo.Component]]:
    if isinstance(component, pyo.Block) or not component.is_indexed():
        yield component.local_name, component
        return
    for index, data in component.items():
        if data.active:
            yield str(index), data


@contextmanager
def _deactivated(items: Iterable[pyo.Component]) -> Iterator[None]:
    items = [c for c in items if c.active]
    for c in items:
        c.deactivate()
    try:
        yield
    finally:
        for c in items:
            c.activate()


def diagnose(m: CounterfactualModel, solver: str | SolverBackend,
             settings: SolverSettings) -> Diagnosis:
    """Find the constraint groups of an infeasible ``m`` whose relaxation restores it.

    Uses a fresh solver instance (the caller's persistent one is left untouched);
    each probe is a feasibility solve limited to min(time_limit, 30 s).
    """
    backend = make_solver(solver.name if isinstance(solver, SolverBackend) else solver)
    cap = min(settings.time_limit or 30.0, 30.0)  # pragma: no mutate (a default >= 30: 30)
    probe = SolverSettings(time_limit=cap,
                           mip_gap=0.999, threads=settings.threads, seed=settings.seed,
                           options=settings.options)
    result = Diagnosis()

    def feasible() -> bool:
        outcome = backend.solve(m, probe)
        if outcome.status not in (Status.INFEASIBLE,) and not outcome.status.has_solution:
            result.undecided = True
        return outcome.status.has_solution

    groups = relaxable_groups(m)
    for name, comp in groups.items():
        with _deactivated([comp]):
            if feasible():
                result.groups.append(name)
    if not result.groups:
        with _deactivated(groups.values()):
            all_relaxed = feasible()
        if not all_relaxed:
            result.unreachable = not result.undecided
            return result
        needed = list(groups)
        for name in list(needed):  # deletion filter: keep `name` active if we can
            with _deactivated(groups[g] for g in needed if g != name):
                if feasible():
                    needed.remove(name)
        result.groups, result.joint = needed, True
        result.inconsistent = not needed
        return result
    for name in result.groups:
        result.members[name] = _minimal_members(groups[name], feasible)
    return result


def _minimal_members(component: pyo.Component, feasible: Callable[[], bool]) -> list[str]:
    """A minimal set of the group's members whose relaxation suffices (``[]`` for a
    group without members, e.g. a constraint block, or with more than MAX_MEMBERS)."""
    if isinstance(component, pyo.Block) or not component.is_indexed():
        return []
    members = dict(_members(component))
    if len(members) == 1:  # the one member (e.g. the one immutable feature) is the cause
        return list(members)
    if len(members) > MAX_MEMBERS:
        return []
    relaxed = list(members)
    with _deactivated(members.values()):
        for label in list(relaxed):
            members[label].activate()
            if feasible():
                relaxed.remove(label)
            else:
                members[label].deactivate()
    return relaxed
