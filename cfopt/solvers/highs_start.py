"""A MIP start for HiGHS, completed before the run.

HiGHS takes a user solution at its first call for one
(:meth:`~cfopt.solvers.highs.HighsBackend._solve_from`). Given only some columns it is
asked to repair them (fix the given integers, find the rest); HiGHS 1.16 gave up on
that repair for starts it accepted whole: on a default ``MLPClassifier`` pipeline on
raw Adult (row 16: the features and every ReLU binary given, the completion an LP
with 0 infeasibility) it found no incumbent, ran its feasibility pump for 14 s at the
root and proved the optimum in 14.1 s; offered the same start completed, it proved it
in 0.18 s. So a start that gives every integer column is completed here, by the LP of
the continuous columns with the integers fixed, and offered whole.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

#: seconds for the completion LP (it is small: the model's continuous columns)
COMPLETION_SECONDS = 5.0


def completed_start(highs: Any, index: np.ndarray, values: np.ndarray,
                    seconds: float = COMPLETION_SECONDS) -> np.ndarray | None:
    """Every column's value at the start ``values`` of the columns ``index`` of the
    loaded HiGHS model ``highs``: the least-cost completion by the model's own LP with
    its integer columns fixed at the start's (rounded, within their bounds) and its other
    given columns free, so that each is set by the rows. ``None`` when the start leaves
    an integer column out (HiGHS then repairs it itself), the model has no integer
    column, or that LP has no optimum within ``seconds`` (the start is not a point of the
    model)."""
    lp = highs.getLp()
    # pragma: no mutate start (an empty integrality_ and zeros alike: no integer column)
    integral = np.asarray(lp.integrality_, dtype=int) if len(lp.integrality_) else \
        np.zeros(lp.num_col_, dtype=int)
    # pragma: no mutate end
    integers = np.flatnonzero(integral != 0)
    if not len(integers) or not np.isin(integers, index).all():
        return None
    import highspy

    # pragma: no mutate start (HiGHS's column bounds are doubles: float64 either way)
    lower = np.asarray(lp.col_lower_, dtype=float)
    upper = np.asarray(lp.col_upper_, dtype=float)
    # pragma: no mutate end
    at = dict(zip(index.tolist(), values.tolist()))
    fixed = np.clip(np.round([at[j] for j in integers]), lower[integers], upper[integers])
    lower[integers] = upper[integers] = fixed
    lp.col_lower_, lp.col_upper_ = lower, upper
    lp.integrality_ = []
    completion = highspy.Highs()
    completion.setOptionValue("output_flag", False)
    completion.setOptionValue("time_limit", seconds)
    # the MIP takes a start within its feasibility tolerance (cfopt's: 1e-8); after
    # presolve, the Adult MLP's completion broke a row by 9e-8 (without: 3e-15)
    completion.setOptionValue("presolve", "off")  # pragma: no mutate (HiGHS reads "OFF" as "off")
    # the process's one thread scheduler refuses another thread count
    completion.setOptionValue("threads", highs.getOptionValue("threads")[1])
    completion.passModel(lp)
    completion.run()
    if completion.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    # pragma: no mutate start (HiGHS's column values are doubles: float64 either way)
    return np.asarray(completion.getSolution().col_value, dtype=float)
    # pragma: no mutate end


@contextlib.contextmanager
def starting_from(highs: Any, index: np.ndarray, values: np.ndarray,
                  seconds: float = COMPLETION_SECONDS) -> Iterator[bool]:
    """While entered, HiGHS's (``highs``) first call for a user solution gets the start
    ``values`` of the columns ``index``: every column of it when
    :func:`completed_start` completes it (within ``seconds``), else those columns,
    repaired by HiGHS. Yields whether it was completed. No start when ``index`` is
    empty."""
    full = completed_start(highs, index, values, seconds) if len(index) else None
    sent: list[bool] = []

    def offer(event: Any) -> None:
        if len(index) and not sent:
            sent.append(True)
            if full is not None:
                event.data_in.setSolution(np.arange(len(full), dtype=np.int32), full)
                return
            event.data_in.setSolution(index, values)
            event.data_in.repairSolution()

    highs.cbMipUserSolution.subscribe(offer)
    try:
        yield full is not None
    finally:
        highs.cbMipUserSolution.unsubscribe(offer)
