"""Checks of raw solver options (``solver_options={...}``) before any solve.

HiGHS and CBC ignore an option name they do not know (HiGHS also a value it refuses)
and solve on with their defaults, so a mistyped option would silently change nothing.
Each check asks the solver itself, without a model: HiGHS through a throwaway
``highspy.Highs``, Gurobi through an empty (unstarted, licence-free) environment, CBC
by running its executable with the options and ``-quit``. A refused option raises
``ValueError`` naming it. Other solvers' options are passed through unchecked.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

#: option sets already accepted, per solver (a check runs once per distinct set)
_ACCEPTED: set[tuple[str, str]] = set()


def check_options(solver: str, options: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first option of ``options`` that ``solver``
    (``"highs"``, ``"gurobi"``, ``"cbc"`` or ``"cpsat"``) does not know or whose value it
    refuses."""
    check = _CHECKS.get(solver)
    if check is None or not options:
        return
    key = (solver, repr(sorted(options.items(), key=lambda item: str(item[0]))))
    if key in _ACCEPTED:
        return
    for name, value in options.items():
        if not isinstance(name, str):
            raise ValueError(f"solver option names must be strings, got {name!r}")
        problem = check(name, value)
        if problem:
            raise ValueError(f"solver_options: {solver} {problem}")
    _ACCEPTED.add(key)


def _highs(name: str, value: Any) -> str | None:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    known = h.getOptionValue(name)
    if isinstance(known, tuple) and known[0] != highspy.HighsStatus.kOk:
        return (f"has no option {name!r} (see the HiGHS option list, "
                f"https://ergo-code.github.io/HiGHS/stable/options/definitions/)")
    if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
        return f"option {name!r} refuses the value {value!r}"
    return None


def _gurobi(name: str, value: Any) -> str | None:
    import gurobipy

    env = gurobipy.Env(empty=True)  # never started: no licence check, no log
    try:
        env.setParam(name, value)
    except gurobipy.GurobiError as exc:
        return f"option {name!r}: {exc}"
    except TypeError as exc:
        return f"option {name!r} refuses the value {value!r}: {exc}"
    finally:
        env.dispose()
    return None


def _cbc(name: str, value: Any) -> str | None:
    exe = shutil.which("cbc")
    if exe is None:
        return None  # the solve itself reports the missing executable
    try:
        log = subprocess.run([exe, f"-{name}", str(value), "-quit"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if f"No match for {name}" in log:
        return f"has no option {name!r} (`cbc -?` lists them)"
    if "is illegal" in log or f"Possible options for {name}" in log:
        return f"option {name!r} refuses the value {value!r}"
    return None


def _cpsat(name: str, value: Any) -> str | None:
    from ortools.sat.sat_parameters_pb2 import SatParameters

    params = SatParameters()
    if name not in SatParameters.DESCRIPTOR.fields_by_name:
        return (f"has no parameter {name!r} (see ortools/sat/sat_parameters.proto, "
                f"https://github.com/google/or-tools/blob/stable/ortools/sat/sat_parameters.proto)")
    try:
        setattr(params, name, value)
    except (TypeError, ValueError) as exc:
        return f"parameter {name!r} refuses the value {value!r}: {exc}"
    return None


_CHECKS: dict[str, Callable[[str, Any], str | None]] = {
    "highs": _highs, "gurobi": _gurobi, "cbc": _cbc, "cpsat": _cpsat}
