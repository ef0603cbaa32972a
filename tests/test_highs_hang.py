"""HiGHS with cfopt's options solves a model on which HiGHS 1.16.0 with its defaults
loops forever, past its time limit (``tests/data/highs_hang/``: a German-credit MLP
pipeline query, restricted around its heuristic point, with that point as the partial
MIP start cfopt offers; the loop is presolve's ``strengthenInequalities`` inside the
root reduced-cost heuristic's nested sub-MIP). Run in a child process, so a hang is a
failure, not a stuck suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "highs_hang"

SCRIPT = """
import json, math, sys
import highspy, numpy as np
from cfopt.solvers.base import SolverSettings
from cfopt.solvers.highs import HighsBackend
data = sys.argv[1]
h = highspy.Highs()
h.setOptionValue("output_flag", False)
h.readModel(data + "/model.mps.gz")
settings = SolverSettings(time_limit=5.0, mip_gap=1e-4, threads=1, seed=0)
options = {"mip_rel_gap": 1e-4, "threads": 1, "time_limit": 5.0,
           **HighsBackend()._solver_options(settings)}
for key, value in options.items():
    h.setOptionValue(key, value)
start = json.load(open(data + "/start.json"))
index = np.array(start["columns"], dtype=np.int32)
values = np.array(start["values"], dtype=np.float64)
sent = []
def offer(event):
    if not sent:
        sent.append(True)
        event.data_in.setSolution(index, values)
        event.data_in.repairSolution()
h.cbMipUserSolution.subscribe(offer)
h.run()
print(json.dumps({"status": str(h.getModelStatus()),
                  "objective": h.getInfo().objective_function_value}))
"""


def solve(timeout: float) -> dict | None:
    """The child's answer, or ``None`` when it ran past ``timeout``."""
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(DATA)],
                             capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cfopt_options_solve_the_model_highs_defaults_loop_on() -> None:
    result = solve(timeout=60)
    assert result is not None, "HiGHS ran past its 5 s time limit with cfopt's options"
    assert result["status"].endswith("kOptimal")
    assert result["objective"] == pytest.approx(0.41912747271242595, rel=1e-6)
