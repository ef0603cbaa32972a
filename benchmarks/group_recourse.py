"""Group recourse (issue 41): the fewest actions that move a group of rejected rows.

For each data set (CARLA Adult and COMPAS, UCI German credit), model (a ReLU MLP,
``MLPClassifier((16,))``, and a random forest, ``RandomForestClassifier(20 trees, depth
4, balanced class weights)`` — unweighted, it rejects only 54 German rows —, both
``random_state=0`` on at most 5,000 training rows), group size (the first N of
a fixed random order of the rows the model rejects, so groups are nested) and
``max_changes``, each method of :meth:`cfopt.Explainer.explain_group` answers the same
group: ``column_generation`` (exact: every action checked when there are few, else
pricing MILPs with branch-and-price), ``greedy`` (set-cover greedy over the rows' own
counterfactuals, no bound) and ``direct_milp`` (the compact model). Immutable: Adult's race, sex,
native-country, marital-status, relationship and fnlwgt (age increase-only); COMPAS's
race, sex and two_year_recid (age and priors_count increase-only); German's
foreign_worker, status_sex and people_liable (age increase-only). ``--max-cost`` caps the
weighted L1 cost (1 / range; a category change costs 1) of an action for each row it
moves (default: none).

Time: column generation and the greedy each get ``--time-limit`` (600 s). The direct
MILP gets ten times column generation's time on the same group (at least 30 s, at most
``--direct-limit``, default ``--time-limit``), and runs only for groups up to
``--direct-max`` rows (100): where it does not finish in ten times column generation's
time, column generation is at least 10x faster by construction; where it finishes, the
ratio is measured.

Every answer is re-checked here: each row given an action is predicted by the model's
own ``predict`` on ``space.transform`` of the row with the action applied, each action
changes at most ``max_changes`` features and no immutable one (``verified``).

Rows of ``benchmarks/results/group_recourse.json``: ``dataset``, ``model``,
``group_size``, ``max_changes``, ``max_cost``, ``method``, ``status``, ``actions``,
``rules`` (``--rules``: ``none``, or ``plausible``: :func:`with_rules`, checked on
every moved row by the explainer's own check), ``coverage`` (share of the group given an
action), ``mean_cost``, ``bound``,
``proven_optimal``, ``seconds``, ``pricing_seconds``, ``iterations``, ``columns``,
``time_limit``, ``verified``, ``message``. Written after every run; a run already in
the file (same key) is skipped, so an interrupted benchmark resumes.

    python benchmarks/group_recourse.py [--datasets adult,compas,german] [--models mlp,rf]
        [--sizes 50,100,200] [--max-changes 1,2,3] [--methods column_generation,greedy,
        direct_milp] [--max-cost C] [--rules none|plausible] [--time-limit 600]
        [--direct-max 100] [--out FILE]
    python benchmarks/group_recourse.py --table group_recourse.json   # the README's table
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, environment, write  # noqa: E402

import cfopt  # noqa: E402

METHODS = ("column_generation", "greedy", "direct_milp")
KEY = ("dataset", "model", "group_size", "max_changes", "max_cost", "rules", "method")
RULES = ("none", "plausible")


def with_rules(dataset: str, explainer: cfopt.Explainer) -> cfopt.Explainer:
    """``--rules plausible``: the explainer with rules a user of each data set would
    declare, each held by every row of a group with the row as the factual — a declared
    block or two and one Pyomo constraint added by hand.

    Adult: a year more of education takes a year of age
    (``IfIncreases("education-num", then="age", by=1)``), capital gain in steps of 1,000,
    and by hand: hours per week rise by at most 20. COMPAS: the length of stay only
    shortens (``LinearConstraint(relative=True)``), and by hand: by at most 30 days.
    German: credit amount in steps of 500, becoming a home owner keeps the property
    (``IfCategory("housing", "own", fixed=["property"])``), and by hand: the duration
    does not rise."""
    import pyomo.environ as pyo

    blocks: list[cfopt.ConstraintBlock] = {
        "adult": [cfopt.IfIncreases("education-num", then="age", by=1),
                  cfopt.Step("capital-gain", 1000)],
        "compas": [cfopt.LinearConstraint({"length_of_stay": 1}, "<=", 0, relative=True)],
        "german": [cfopt.Step("credit_amount", 500),
                   cfopt.IfCategory("housing", "own", fixed=["property"])]}[dataset]
    fenced = cfopt.Explainer(**explainer.build_arguments, constraints=blocks)
    m = fenced.milp
    if dataset == "adult":
        m.by_hand = pyo.Constraint(expr=m.x["hours-per-week"] <= m.x0["hours-per-week"] + 20)
    elif dataset == "compas":
        m.by_hand = pyo.Constraint(expr=m.x["length_of_stay"] >= m.x0["length_of_stay"] - 30)
    else:
        m.by_hand = pyo.Constraint(expr=m.x["duration"] <= m.x0["duration"])
    return fenced


def load(name: str) -> tuple[pd.DataFrame, np.ndarray, cfopt.FeatureSpace]:
    """The data set, its labels and its feature space with the actionability above."""
    if name == "german":
        data = cfopt.datasets.load_german()
    else:
        loader = {"adult": cfopt.datasets.load_adult, "compas": cfopt.datasets.load_compas}
        data = loader[name](download=False)
    X, y = data.X, np.asarray(data.y)
    space = cfopt.FeatureSpace.from_frame(X)
    if name == "adult":
        space.immutable("race", "sex", "native-country", "marital-status", "relationship",
                        "fnlwgt").increase_only("age")
    elif name == "compas":
        space.immutable("race", "sex", "two_year_recid").increase_only("age", "priors_count")
    else:
        space.immutable("foreign_worker", "status_sex", "people_liable").increase_only("age")
    return X, y, space


def fit(kind: str, Z: np.ndarray, y: np.ndarray) -> Any:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.neural_network import MLPClassifier

    if kind == "mlp":
        return MLPClassifier((16,), max_iter=2000, random_state=0).fit(Z, y)
    return RandomForestClassifier(n_estimators=20, max_depth=4, class_weight="balanced",
                                  random_state=0, n_jobs=1).fit(Z, y)


def verified(answer: Any, model: Any, space: cfopt.FeatureSpace, max_changes: int,
             group: pd.DataFrame, explainer: cfopt.Explainer) -> bool:
    """Every assigned row is predicted 1 by the model itself and, with the row as the
    factual, breaks none of the explainer's declared or raw constraints (its single
    query's check, :meth:`cfopt.CounterfactualModel.violations`); every action is within
    ``max_changes`` features and leaves the immutable ones alone."""
    moved = answer.assignment.to_numpy() >= 0
    if moved.any():
        rows = answer.counterfactuals[moved]
        if not (model.predict(space.transform(rows)) == 1).all():
            return False
    m = explainer.milp
    if m.constraints or m.user_components():
        for i in np.flatnonzero(moved):
            m.set_factual(group.iloc[[i]])
            m.set_target(1)
            if m.violations(answer.counterfactuals.iloc[[i]]):
                return False
    for action in answer.actions:
        if len(action.features) > max_changes or any(space[n].immutable
                                                     for n in action.features):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="adult,compas,german")
    parser.add_argument("--models", default="mlp,rf")
    parser.add_argument("--sizes", default="50,100,200")
    parser.add_argument("--max-changes", default="1,2,3")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--max-cost", type=float, default=None)
    parser.add_argument("--rules", default="none", choices=RULES,
                        help="'plausible': each data set's rules (with_rules)")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--direct-max", type=int, default=100)
    parser.add_argument("--direct-limit", type=float, default=None,
                        help="the most seconds of a direct MILP (default: --time-limit)")
    parser.add_argument("--out", default="group_recourse.json")
    parser.add_argument("--table", metavar="JSON", help="print the Markdown table of a "
                        "results file and stop")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads((RESULTS / args.table).read_text())["rows"]))
        return
    path = RESULTS / args.out
    old = json.loads(path.read_text()) if path.exists() else {"rows": []}
    rows: list[dict[str, Any]] = old["rows"]
    for r in rows:  # rows from before --rules had none
        r.setdefault("rules", "none")
    done = {tuple(r[k] for k in KEY) for r in rows}
    methods = args.methods.split(",")
    for dataset in args.datasets.split(","):
        X, y, space = load(dataset)
        rng = np.random.default_rng(0)
        train = rng.permutation(len(X))[:5000]
        Z = space.transform(X)
        for kind in args.models.split(","):
            model = fit(kind, Z[train], y[train])
            explainer = cfopt.Explainer(model, space)
            if args.rules != "none":
                explainer = with_rules(dataset, explainer)
            rejected = X[model.predict(Z) == 0]
            order = rejected.iloc[np.random.default_rng(1).permutation(len(rejected))]
            for size in map(int, args.sizes.split(",")):
                if size > len(order):
                    print(f"{dataset} {kind}: only {len(order)} rejected rows, not {size}")
                    continue
                group = order.iloc[:size]
                for k in map(int, args.max_changes.split(",")):
                    cg_seconds = None
                    for method in methods:
                        key = (dataset, kind, size, k, args.max_cost, args.rules, method)
                        if method == "direct_milp" and size > args.direct_max:
                            continue
                        if key in done:
                            if method == "column_generation":
                                cg_seconds = next(r["seconds"] for r in rows
                                                  if tuple(r[c] for c in KEY) == key)
                            continue
                        limit = args.time_limit
                        if method == "direct_milp":
                            cap = args.direct_limit or args.time_limit
                            limit = cap if cg_seconds is None else \
                                min(cap, max(30.0, 10 * cg_seconds))
                        t = time.perf_counter()
                        answer = explainer.explain_group(group, target=1, max_changes=k,
                                                         max_cost=args.max_cost,
                                                         method=method, time_limit=limit)
                        seconds = time.perf_counter() - t
                        if method == "column_generation":
                            cg_seconds = seconds
                        row = dict(zip(KEY, key)) | {
                            "status": answer.status.value, "actions": len(answer.actions),
                            "coverage": answer.coverage, "mean_cost": answer.mean_cost,
                            "bound": answer.bound, "proven_optimal": answer.optimal,
                            "seconds": seconds, "pricing_seconds": answer.pricing_seconds,
                            "iterations": answer.iterations, "columns": answer.columns,
                            "time_limit": limit,
                            "verified": verified(answer, model, space, k, group,
                                                 explainer),
                            "message": answer.message}
                        rows.append(row)
                        done.add(key)
                        print(json.dumps({c: row[c] for c in (*KEY, "status", "actions",
                                                               "coverage", "seconds")}),
                              flush=True)
                        write(args.out, {"environment": environment(), "rows": rows})


def table(rows: list[dict[str, Any]]) -> str:
    """One line per group and setting (by data set, model, rows, ``max_changes``, and
    the rules when there are some): each method's actions, proof and seconds."""
    cells: dict[tuple, dict[str, str]] = {}
    for r in rows:
        key = tuple(r.get(k, "none") for k in KEY[:6])
        proof = " proven" if r["proven_optimal"] else \
            (f" (bound {r['bound']})" if r["bound"] is not None else "")
        text = f"{r['actions']}{proof}, {r['seconds']:.1f} s"
        if r["status"] == "no_solution":
            text = f"no solution, {r['seconds']:.0f} s (limit {r['time_limit']:.0f} s)"
        cells.setdefault(key, {})[r["method"]] = text
    lines = ["| data | model | rows | max_changes | column generation | greedy | direct MILP |",
             "|---|---|---|---|---|---|---|"]
    for key, by in sorted(cells.items(), key=lambda item: tuple(map(str, item[0]))[:2] + (
            item[0][2], item[0][3], str(item[0][4]), item[0][5])):
        rules = "" if key[5] == "none" else f" ({key[5]} rules)"
        lines.append("| " + " | ".join(str(k) for k in key[:3]) + f" | {key[3]}{rules} | "
                     + " | ".join(by.get(m, "—") for m in METHODS) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
