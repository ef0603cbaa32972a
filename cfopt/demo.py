"""``cfopt demo``: what cfopt is for, in a few seconds on the bundled German credit data.

A small MLP is trained, and rejected applicants get the closest *actionable* change that
the model accepts: immutable attributes stay, age may only grow and a year of it costs
five times its range weight, no checking account is advised into an overdraft (a
declared ``LinearConstraint`` on the change of the one-hot level "... < 0 DM"), the credit
may be cut by at most half (a one-line Pyomo rule on ``explainer.milp``). One applicant
also gets a small diverse set (each member changes other features), and the chart of the
first answer is saved.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyomo.environ as pyo

from .constraints.rules import LinearConstraint
from .explainer import Explainer
from .results.counterfactual import Counterfactual, CounterfactualSet
from .space.space import FeatureSpace

#: German credit's checking-account level that is an overdraft
OVERDRAFT = "... < 0 DM"


def print_counterfactual(ce: Counterfactual, title: str) -> None:
    """One answer in words: status and proof, timing, note, and the changes."""
    out = sys.stdout
    print(title, file=out)
    proof = ""
    if ce.bound is not None and ce.objective is not None:
        proof = f", objective {ce.objective:.4f}, bound {ce.bound:.4f}"
    print(f"  status: {ce.status.value}{proof}; verified by the model: "
          f"{'yes' if ce.verified else 'no'}", file=out)
    solver_time = f"{ce.solver_time:.3f}" if ce.solver_time is not None else "n/a"
    print(f"  time: build {ce.build_time:.3f} s, solve {ce.solve_time:.3f} s "
          f"({ce.solver} itself {solver_time} s), total {ce.total_time:.3f} s", file=out)
    if ce.message:
        print(f"  note: {ce.message}", file=out)
    if ce.counterfactual is not None:
        table = ce.changes()
        text = (table.reset_index(names="feature").to_string(index=False) if len(table)
                else "(no change)")
        print("  " + text.replace("\n", "\n  "), file=out)
    print(file=out)


def print_set(found: CounterfactualSet, title: str) -> None:
    """A diverse set in words: each member's changes, cost and status."""
    print(title)
    for k, member in enumerate(found.members, 1):
        moves = "; ".join(f"{name} {row['from']} -> {row['to']}"
                          for name, row in member.changes().iterrows())
        print(f"  {k}. {moves}  (cost {member.objective:.3f}, {member.status.value})")
    print()


def _save_chart(ce: Counterfactual, name: str) -> str:
    """Save the change chart of ``ce``; returns where, or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        return "not drawn: pip install 'cfopt[plot]' adds matplotlib"
    path = Path(tempfile.gettempdir()) / name
    ax = ce.plot()
    ax.figure.savefig(path, dpi=100)
    matplotlib.pyplot.close(ax.figure)
    return f"saved to {path}"


def demo(n: int = 3, solver: str = "highs", seed: int = 0) -> list[Counterfactual]:
    """Train a small MLP on German credit and explain ``n`` rejected applicants."""
    import torch

    from .datasets import load_german

    t0 = time.perf_counter()
    data = load_german()
    space = FeatureSpace.from_frame(data.X)
    space.immutable("foreign_worker", "status_sex", "people_liable")
    space.increase_only("age")
    Z = torch.tensor(space.transform(data.X), dtype=torch.float32)
    y = torch.tensor(data.y.to_numpy(), dtype=torch.float32)
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=1e-4)
    for _ in range(150):
        optimizer.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(Z).squeeze(1), y)
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        good = (net(Z).squeeze(1) > 0).numpy()
    print(f"German credit (UCI, CC BY 4.0): {len(data.X)} applicants, {len(space)} features "
          f"-> {space.n_inputs} model inputs")
    print(f"MLP {space.n_inputs}-16-16-1 trained in {time.perf_counter() - t0:.1f} s, "
          f"training accuracy {(good == data.y.to_numpy()).mean():.3f}")
    age = space["age"]
    # never advise an overdraft: no move into a checking account below 0 DM
    no_overdraft = LinearConstraint({("status", OVERDRAFT): 1}, "<=", 0, relative=True,
                                    name="no_overdraft")
    explainer = Explainer(net, space, solver=solver,
                          weights={"age": 5.0 / age.weight_spread}, constraints=[no_overdraft])
    m = explainer.milp
    m.credit_at_least_half = pyo.Constraint(
        expr=m.x["credit_amount"] >= 0.5 * m.x0["credit_amount"])
    print("actionable changes only: foreign_worker, status_sex, people_liable immutable; "
          "age increase-only, a year of it\ncosting 5x its range weight; never into an "
          "overdraft (a declared rule); the credit cut by at most half\n(a Pyomo rule on "
          "explainer.milp)\n")
    rejected = np.flatnonzero(~good)[:n]
    results = []
    for i in rejected:
        ce = explainer.explain(data.X.iloc[[i]], target=1)
        print_counterfactual(ce, f"Applicant #{i}: predicted bad credit (0) -> closest "
                                 f"actionable change to good credit (1)")
        results.append(ce)
    if len(rejected):
        last = rejected[-1]
        found = explainer.explain(data.X.iloc[[last]], target=1, n=3, diversity="nogood")
        print_set(found, f"Three different ways for applicant #{last} (each member changes "
                          f"other features, by a tenth of a range at least):")
    if results and results[0].found:
        print(f"Chart of applicant #{rejected[0]}'s change: "
              f"{_save_chart(results[0], 'cfopt-demo.png')}")
    ok = sum(ce.verified for ce in results)
    print(f"{ok}/{len(results)} counterfactuals verified by the model; "
          f"whole demo {time.perf_counter() - t0:.1f} s")
    return results
