"""The bad-input table: one :class:`Case` per way of calling cfopt wrongly.

Shared by ``tests/test_bad_input.py`` (one test per case) and
``benchmarks/robustness_suite.py`` (one row of ``hardening.json`` per case), so the
tests and the report can never disagree. A case passes (:func:`run_case`) when its
call raises exactly the expected exception type, the message contains every expected
word (the offending column, feature, option, model part or file), and nothing partial
came out: no return value, nothing printed, and the shared explainer still gives the
reference counterfactual afterwards.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import cfopt
from cfopt.cli import explain_file

#: the toy data: a wide-range income beside small integers, binaries, labels
N_ROWS = 300


@dataclass
class Context:
    """Everything the cases act on, built once by :func:`make_context`."""

    X: pd.DataFrame
    y: np.ndarray
    space: cfopt.FeatureSpace
    net: torch.nn.Sequential
    explainer: cfopt.Explainer
    x: pd.DataFrame  # a row the network classifies 0
    reference: cfopt.Counterfactual  # its counterfactual (target 1)
    folder: Path  # for the files the cases write


@dataclass(frozen=True)
class Case:
    """A wrong call: ``run(ctx)`` must raise exactly ``error`` with every one of
    ``words`` in its message; ``skip()`` gives a reason to skip it here, or None."""

    name: str
    run: Callable[[Context], Any]
    error: type[BaseException]
    words: tuple[str, ...]
    skip: Callable[[], str | None] | None = None


def toy_frame(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Mixed raw rows (income in the tens of thousands next to binaries) and labels."""
    rng = np.random.default_rng(seed)
    levels = ["none", "school", "college", "phd"]
    X = pd.DataFrame({
        "income": rng.uniform(1_000, 150_000, N_ROWS).round(2),
        "age": rng.integers(18, 90, N_ROWS),
        "children": rng.integers(0, 6, N_ROWS),
        "owns_home": rng.integers(0, 2, N_ROWS),
        "city": rng.choice(["north", "south", "east"], N_ROWS),
        "education": pd.Categorical(rng.choice(levels, N_ROWS), categories=levels,
                                    ordered=True),
        "phone": rng.choice(["no", "yes"], N_ROWS),
    })
    score = (X.income / 150_000 + 0.3 * X.owns_home - 0.05 * X.children
             + 0.2 * (X.city == "north"))
    return X, (score > 0.6).astype(int).to_numpy()


def train(Z: np.ndarray, y: np.ndarray, hidden: int = 8, epochs: int = 150,
          seed: int = 0) -> torch.nn.Sequential:
    """A small ReLU network with one logit, trained full-batch (deterministic; one torch
    thread: on a loaded machine two threads made this 100x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _fit(Z, y, hidden, epochs, seed)
    finally:
        torch.set_num_threads(threads)


def _fit(Z: np.ndarray, y: np.ndarray, hidden: int, epochs: int,
         seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(Z.shape[1], hidden), torch.nn.ReLU(),
                              torch.nn.Linear(hidden, 1))
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    Zt, yt = torch.tensor(Z, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(Zt).squeeze(1), yt)
        loss.backward()
        opt.step()
    return net.eval()


def make_context(folder: Path) -> Context:
    X, y = toy_frame()
    space = cfopt.FeatureSpace.from_frame(X)
    net = train(space.transform(X), y)
    explainer = cfopt.Explainer(net, space)
    rejected = np.flatnonzero(explainer.milp.predict(X) == 0)
    x = X.iloc[[int(rejected[0])]].copy()
    reference = explainer.explain(x, target=1)
    assert reference.verified, reference
    return Context(X, y, space, net, explainer, x, reference, folder)


# ----------------------------------------------------------------------- helpers
def _explain(ctx: Context, change: Callable[[pd.DataFrame], Any], **kwargs: Any) -> Any:
    return ctx.explainer.explain(change(ctx.x.copy()), **kwargs)


def _space(ctx: Context) -> cfopt.FeatureSpace:
    return cfopt.FeatureSpace.from_frame(ctx.X)


def _income_only(ctx: Context) -> torch.nn.Sequential:
    """A linear network whose logit depends on income alone (class 1 above 80 000)."""
    net = torch.nn.Sequential(torch.nn.Linear(ctx.space.n_inputs, 1))
    income = ctx.space["income"]
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].weight[0, 0] = income.scale / 10_000  # logit = (income - 80 000) / 10 000
        net[0].bias.fill_((income.shift - 80_000) / 10_000)
    return net


def _poor(ctx: Context) -> pd.DataFrame:
    return ctx.X[ctx.X.income < 50_000].iloc[[0]]


def _explain_income(ctx: Context, space: cfopt.FeatureSpace, **kwargs: Any) -> Any:
    return cfopt.Explainer(_income_only(ctx), space, **kwargs).explain(_poor(ctx), target=1)


def _fitted(ctx: Context, model: Any, columns: int | None = None) -> Any:
    """``model`` fitted on the encoded rows (the first ``columns`` inputs if given)."""
    from sklearn.exceptions import ConvergenceWarning

    Z = ctx.space.transform(ctx.X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a few iterations suffice here
        return model.fit(Z[:, :columns] if columns else Z, ctx.y)


def _torch(ctx: Context, *layers: torch.nn.Module) -> torch.nn.Sequential:
    return torch.nn.Sequential(*layers).eval()


def _pipeline(ctx: Context, step: Any) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    numeric = ["income", "age", "children"]
    return Pipeline([("prep", step), ("clf", LogisticRegression(max_iter=1000))]).fit(
        ctx.X[numeric], ctx.y)


def _onnx(ctx: Context, name: str, net: torch.nn.Module, width: int) -> str:
    path = ctx.folder / name
    torch.onnx.export(net, (torch.zeros(1, width),), str(path), dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    return str(path)


def _file(ctx: Context, name: str, content: bytes) -> str:
    path = ctx.folder / name
    path.write_bytes(content)
    return str(path)


def _csv(ctx: Context) -> str:
    path = ctx.folder / "rows.csv"
    ctx.X.assign(label=ctx.y).to_csv(path, index=False)
    return str(path)


def _cli(ctx: Context, model: str, data: str | None = None, **kwargs: Any) -> Any:
    options = {"space_file": None, "scaling": "minmax", "solver": "highs", "time_limit": None,
               "immutable": [], "increase_only": [], "decrease_only": [], "as_json": True}
    options.update(kwargs)
    return explain_file(model, data or _csv(ctx), "label", 0, **options)


def _fifo(ctx: Context) -> str:
    """A named pipe nobody writes to: reading it would block forever."""
    path = ctx.folder / "rows.fifo"
    if not path.exists():
        os.mkfifo(path)
    return str(path)


def _pickled(ctx: Context) -> str:
    from sklearn.linear_model import LogisticRegression

    return _file(ctx, "model.pkl", pickle.dumps(_fitted(ctx, LogisticRegression(max_iter=1000))))


def _not_installed(solver: str) -> Callable[[], str | None]:
    def skip() -> str | None:
        import pyomo.environ as pyo

        available = pyo.SolverFactory(solver).available(exception_flag=False)
        return f"{solver} is installed here" if available else None
    return skip


def _gurobi_not_size_limited() -> str | None:
    """A reason to skip the licence case: gurobipy absent or its licence unlimited."""
    try:
        import gurobipy
    except ImportError:
        return "gurobipy is not installed"
    with gurobipy.Env(params={"OutputFlag": 0}) as env, gurobipy.Model(env=env) as model:
        model.addVars(2001)
        try:
            model.optimize()
        except gurobipy.GurobiError:
            return None
    return "this Gurobi licence is not size-limited"


def _too_big_for_gurobi(ctx: Context) -> Any:
    torch.manual_seed(0)
    net = _torch(ctx, torch.nn.Linear(ctx.space.n_inputs, 400), torch.nn.ReLU(),
                 torch.nn.Linear(400, 1))
    return cfopt.Explainer(net, ctx.space, solver="gurobi", bound_tightening="interval",
                           tighten_per_query=False).explain(ctx.x)


def _contradictory_space(ctx: Context) -> cfopt.FeatureSpace:
    """Income increase-only, with its upper bound below the factual's income."""
    space = _space(ctx)
    space.increase_only("income").set("income", upper=float(_poor(ctx).income.iloc[0]) - 1)
    return space


# ------------------------------------------------------------------------- cases
def _cases() -> list[Case]:
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import AdaBoostClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler
    from sklearn.svm import SVC

    V, T = ValueError, TypeError
    U = cfopt.UnsupportedModelError
    nan_net = _torch_nan
    return [
        # ---- columns and values of the row to explain
        Case("missing column", lambda c: _explain(c, lambda x: x.drop(columns=["age"])), V,
             ("missing column(s)", "'age'")),
        Case("extra column", lambda c: _explain(c, lambda x: x.assign(label=1)), V,
             ("unexpected column(s)", "'label'")),
        Case("misspelt column", lambda c: _explain(
            c, lambda x: x.rename(columns={"income": "Income"})), V, ("missing", "'income'")),
        Case("duplicate column", lambda c: _explain(
            c, lambda x: pd.concat([x, x[["age"]]], axis=1)), V, ("duplicate column", "'age'")),
        Case("text in numeric column", lambda c: _explain(c, lambda x: x.assign(age="old")), V,
             ("column 'age'", "'old'", "not a number")),
        Case("boolean in integer column", lambda c: _explain(
            c, lambda x: x.assign(children=True)), V, ("column 'children'", "boolean")),
        Case("complex number", lambda c: _explain(c, lambda x: x.assign(income=5e4 + 1j)), V,
             ("column 'income'", "complex")),
        Case("timestamp in numeric column", lambda c: _explain(
            c, lambda x: x.assign(income=pd.Timestamp("2024-01-01"))), V,
             ("column 'income'", "not a number")),
        Case("non-integer in integer column", lambda c: _explain(
            c, lambda x: x.assign(age=30.5)), V, ("column 'age'", "non-integer", "30.5")),
        Case("NaN", lambda c: _explain(c, lambda x: x.assign(income=np.nan)), V,
             ("column 'income'", "missing value (NaN)")),
        Case("None category", lambda c: _explain(c, lambda x: x.assign(city=None)), V,
             ("column 'city'", "missing value")),
        Case("+inf", lambda c: _explain(c, lambda x: x.assign(income=np.inf)), V,
             ("column 'income'", "infinite value inf")),
        Case("-inf", lambda c: _explain(c, lambda x: x.assign(income=-np.inf)), V,
             ("column 'income'", "infinite value -inf")),
        Case("unseen category", lambda c: _explain(c, lambda x: x.assign(city="west")), V,
             ("column 'city'", "unseen category 'west'")),
        Case("ordinal code instead of label", lambda c: _explain(
            c, lambda x: x.assign(education=2)), V, ("column 'education'", "unseen category 2")),
        Case("unseen binary label", lambda c: _explain(c, lambda x: x.assign(phone="maybe")), V,
             ("column 'phone'", "'maybe'")),
        Case("factual outside declared bounds", lambda c: _explain(
            c, lambda x: x.assign(age=120)), V, ("column 'age'", "120", "outside the declared")),
        Case("two rows at once", lambda c: c.explainer.explain(c.X.iloc[:2]), V,
             ("one row at a time", "explain_many")),
        Case("no row", lambda c: c.explainer.explain(c.X.iloc[:0]), V, ("got 0 rows",)),
        Case("not a frame", lambda c: c.explainer.explain([1, 2, 3]), T,
             ("DataFrame, Series or dict", "list")),
        # ---- targets
        Case("unknown target class", lambda c: _explain(c, lambda x: x, target=7), V,
             ("unknown target class 7", "[0, 1]")),
        Case("target equal to the current class", lambda c: _explain(c, lambda x: x, target=0),
             cfopt.errors.AlreadyTargetError, ("already classified as 0",)),
        Case("empty target set", lambda c: _explain(c, lambda x: x, target=[]), V,
             ("target set is empty",)),
        # ---- actionability and infeasibility
        Case("immutable feature must change", lambda c: _explain_income(
            c, _space(c).immutable("income")), cfopt.InfeasibleError,
             ("constraint group 'immutable'", "relax 'income'")),
        Case("decrease-only feature must increase", lambda c: _explain_income(
            c, _space(c).decrease_only("income")), cfopt.InfeasibleError,
             ("'decrease_only'", "relax 'income'")),
        Case("increase-only with upper bound below the factual", lambda c: _explain_income(
            c, _contradictory_space(c)), V, ("column 'income'", "outside the declared bounds")),
        Case("actionability of an unknown feature", lambda c: _space(c).immutable(
            "age", "height"), V, ("unknown feature(s) ['height']",)),
        Case("increase-only and decrease-only", lambda c: _space(c).increase_only(
            "age").decrease_only("age"), V, ("'age'", "already increase-only", "immutable")),
        Case("user constraint conflicts with the target", lambda c: _explain_income(
            c, _space(c), constraints=[cfopt.LinearConstraint(
                {"income": 1}, "<=", 1_000, relative=True, name="budget")]),
             cfopt.InfeasibleError, ("constraint group 'budget'",)),
        Case("target unreachable inside the bounds", lambda c: _explain_income(
            c, _space(c).set("income", upper=60_000)), cfopt.InfeasibleError,
             ("no point inside the feature bounds",)),
        Case("constraint on an unknown feature", lambda c: cfopt.Explainer(
            c.net, c.space, constraints=[cfopt.LinearConstraint({"height": 1}, "<=", 2)]), V,
             ("unknown feature 'height'",)),
        # ---- models
        Case("unsupported model type", lambda c: cfopt.Explainer(
            _fitted(c, KNeighborsClassifier()), c.space), U, ("KNeighborsClassifier",)),
        Case("unsupported ensemble", lambda c: cfopt.Explainer(
            _fitted(c, AdaBoostClassifier(n_estimators=3)), c.space), U,
             ("AdaBoostClassifier",)),
        Case("sigmoid hidden layer (torch)", lambda c: cfopt.Explainer(_torch(
            c, torch.nn.Linear(9, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 1)), c.space), U,
             ("torch layer 1 (Sigmoid)", "hidden")),
        Case("tanh hidden node (ONNX)", lambda c: cfopt.Explainer(_onnx(c, "tanh.onnx", _torch(
            c, torch.nn.Linear(9, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)), 9), c.space), U,
             ("(Tanh)", "not supported")),
        Case("tanh activation (sklearn MLP)", lambda c: cfopt.Explainer(_fitted(
            c, MLPClassifier((4,), activation="tanh", max_iter=20)), c.space), U,
             ("activation='tanh'",)),
        Case("non-linear SVM kernel", lambda c: cfopt.Explainer(_fitted(c, SVC()), c.space), U,
             ("kernel='rbf'",)),
        Case("unsupported pipeline step", lambda c: cfopt.Explainer(_pipeline(c, ColumnTransformer(
            [("num", PolynomialFeatures(2), ["income", "age", "children"])])),
            cfopt.FeatureSpace.from_frame(c.X[["income", "age", "children"]])), U,
             ("pipeline step", "PolynomialFeatures")),
        Case("pipeline not fitted on a DataFrame", lambda c: cfopt.Explainer(Pipeline(
            [("scale", StandardScaler()), ("clf", LogisticRegression(max_iter=1000))]).fit(
            c.X[["income", "age"]].to_numpy(), c.y), _space(c)), U, ("Pipeline", "DataFrame")),
        Case("unfitted model", lambda c: cfopt.Explainer(LogisticRegression(), c.space), U,
             ("LogisticRegression", "not fitted")),
        Case("NaN weights", lambda c: cfopt.Explainer(nan_net(c), c.space), U,
             ("dense layer 0", "non-finite")),
        Case("input width: network vs space", lambda c: cfopt.Explainer(_torch(
            c, torch.nn.Linear(8, 1)), c.space), V, ("takes 8 inputs", "encodes 9")),
        Case("input width: forest vs space", lambda c: cfopt.Explainer(_fitted(
            c, RandomForestClassifier(3, max_depth=2, random_state=0), columns=5), c.space), V,
             ("RandomForestClassifier", "takes 5 inputs", "encodes 9")),
        Case("input width: pipeline columns vs space", lambda c: cfopt.Explainer(_pipeline(
            c, StandardScaler()), cfopt.FeatureSpace.from_frame(c.X[["income", "age"]])), V,
             ("fitted on columns", "missing ['children']")),
        # ---- options
        Case("unknown explain option", lambda c: _explain(c, lambda x: x, timelimit=5), T,
             ("unknown option(s) ['timelimit']",)),
        Case("unknown Explainer keyword", lambda c: cfopt.Explainer(
            c.net, c.space, time_limt=5), T, ("time_limt",)),
        Case("unknown HiGHS option", lambda c: cfopt.Explainer(
            c.net, c.space, solver_options={"presolv": "off"}), V, ("highs", "'presolv'")),
        Case("HiGHS option value refused", lambda c: cfopt.Explainer(
            c.net, c.space, solver_options={"presolve": "maybe"}), V,
             ("'presolve'", "'maybe'")),
        Case("unknown CBC option", lambda c: cfopt.Explainer(
            c.net, c.space, solver="cbc", solver_options={"ratiogapp": 0.1}), V,
             ("cbc", "'ratiogapp'")),
        Case("unknown diversity option", lambda c: _explain(c, lambda x: x, n=2, hamming_d=2),
             T, ("hamming_d",)),
        Case("zero time limit", lambda c: _explain(c, lambda x: x, time_limit=0), V,
             ("time_limit", "positive")),
        Case("negative time limit", lambda c: cfopt.Explainer(c.net, c.space, time_limit=-1),
             V, ("time_limit", "-1")),
        Case("NaN time limit", lambda c: cfopt.Explainer(c.net, c.space, time_limit=np.nan), V,
             ("time_limit", "nan")),
        Case("text time limit", lambda c: cfopt.Explainer(c.net, c.space, time_limit="60"), T,
             ("time_limit", "'60'")),
        Case("MIP gap out of range", lambda c: _explain(c, lambda x: x, mip_gap=1.5), V,
             ("mip_gap", "1.5")),
        Case("zero threads", lambda c: cfopt.Explainer(c.net, c.space, threads=0), V,
             ("threads", "0")),
        Case("zero margin", lambda c: cfopt.Explainer(c.net, c.space, margin=0), V,
             ("margin", "positive")),
        Case("unknown objective", lambda c: cfopt.Explainer(c.net, c.space, objective="l2"), V,
             ("objective", "'l2'")),
        Case("negative objective coefficient", lambda c: cfopt.Explainer(
            c.net, c.space, objective={"l1": -1}), V, ("'l1'", "non-negative")),
        Case("unknown weights scheme", lambda c: cfopt.Explainer(
            c.net, c.space, weights="std"), V, ("weights", "'std'")),
        Case("zero max_changes", lambda c: cfopt.Explainer(c.net, c.space, max_changes=0), V,
             ("max_changes", "positive integer")),
        Case("max_changes without a cap", lambda c: _explain(c, lambda x: x, max_changes=2), V,
             ("built without max_changes",)),
        Case("unknown bound tightening", lambda c: cfopt.Explainer(
            c.net, c.space, bound_tightening="milp"), V, ("bound_tightening", "'milp'")),
        Case("negative verify_retries", lambda c: cfopt.Explainer(
            c.net, c.space, verify_retries=-1), V, ("verify_retries", "-1")),
        Case("space is not a FeatureSpace", lambda c: cfopt.Explainer(c.net, c.X), T,
             ("space must be a cfopt.FeatureSpace", "DataFrame")),
        Case("weight for an unknown feature", lambda c: cfopt.Explainer(
            c.net, c.space, weights={"height": 1.0}), V, ("'height'",)),
        Case("negative weight", lambda c: cfopt.Explainer(
            c.net, c.space, weights={"age": -1.0}), V, ("'age'", "non-negative")),
        Case("unknown feature kind", lambda c: cfopt.FeatureSpace.from_frame(
            c.X, kinds={"age": "real"}), V, ("feature 'age'", "unknown kind 'real'")),
        # ---- solvers
        Case("nonexistent solver", lambda c: cfopt.Explainer(c.net, c.space, solver="simplex3000"),
             V, ("unknown solver 'simplex3000'",)),
        Case("solver not installed", lambda c: cfopt.Explainer(c.net, c.space, solver="glpk"),
             cfopt.SolverNotAvailableError, ("'glpk'", "not available"),
             skip=_not_installed("glpk")),
        Case("Gurobi over its licence size", _too_big_for_gurobi, cfopt.SolverLicenseError,
             ("size-limited", "highs"), skip=_gurobi_not_size_limited),
        # ---- files
        Case("ONNX file that is not a model", lambda c: cfopt.Explainer(
            _file(c, "junk.onnx", b"not a model"), c.space), U, ("junk.onnx", "not an ONNX model")),
        Case("ONNX file that does not exist", lambda c: cfopt.Explainer(
            str(c.folder / "absent.onnx"), c.space), FileNotFoundError, ("absent.onnx",)),
        Case("CSV that does not parse", lambda c: _cli(c, _onnx(c, "net.onnx", c.net, 9), _file(
            c, "bad.csv", b'a,b\n1,"2\n3,4,5,6\n')), V, ("bad.csv", "not a readable CSV")),
        Case("space JSON that does not parse", lambda c: cfopt.FeatureSpace.from_json(
            _file(c, "space.json", b"features: none")), V, ("space.json", "not FeatureSpace JSON")),
        Case("pickled model without --allow-pickle", lambda c: _cli(c, _pickled(c)), V,
             ("model.pkl", "--allow-pickle")),
        Case("CSV path that is a directory", lambda c: _cli(
            c, _onnx(c, "net.onnx", c.net, 9), str(c.folder)), V, ("--data", "is a directory")),
        Case("CSV path that is a FIFO", lambda c: _cli(
            c, _onnx(c, "net.onnx", c.net, 9), _fifo(c)), V, ("--data", "not a regular file")),
        Case("space JSON path that is a directory", lambda c: _cli(
            c, _onnx(c, "net.onnx", c.net, 9), space_file=str(c.folder)), V,
             ("--space", "is a directory")),
    ]


def _torch_nan(ctx: Context) -> torch.nn.Sequential:
    net = torch.nn.Sequential(torch.nn.Linear(ctx.space.n_inputs, 1))
    with torch.no_grad():
        net[0].weight.fill_(float("nan"))
    return net


CASES: list[Case] = _cases()


@dataclass
class Outcome:
    """What a case did: ``got_error`` the exception type's name (or what came back),
    ``ok`` whether it met its case, ``problems`` why not."""

    case: str
    expected_error: str
    got_error: str | None
    message: str
    ok: bool
    problems: list[str]

    def row(self) -> dict[str, Any]:
        return {"case": self.case, "expected_error": self.expected_error,
                "got_error": self.got_error, "ok": self.ok, "message": self.message,
                "problems": self.problems}


def run_case(case: Case, ctx: Context) -> Outcome:
    """Run one case and check it (module docstring)."""
    problems: list[str] = []
    printed = io.StringIO()
    got: BaseException | None = None
    with contextlib.redirect_stdout(printed):
        try:
            returned = case.run(ctx)
        except Exception as exc:  # the point: whatever it raises is examined
            got = exc
        else:
            problems.append(f"returned {type(returned).__name__} instead of raising")
    message = str(got) if got is not None else ""
    if got is not None and type(got) is not case.error:
        problems.append(f"raised {type(got).__name__}, not exactly {case.error.__name__}")
    missing = [w for w in case.words if w not in message]
    if got is not None and missing:
        problems.append(f"message lacks {missing}")
    if printed.getvalue():
        problems.append(f"printed output: {printed.getvalue()[:200]!r}")
    again = ctx.explainer.explain(ctx.x, target=1)
    if not (again.verified and again.counterfactual.equals(ctx.reference.counterfactual)):
        problems.append("the shared explainer no longer gives the reference counterfactual")
    return Outcome(case.name, case.error.__name__,
                   type(got).__name__ if got is not None else None, message, not problems,
                   problems)
