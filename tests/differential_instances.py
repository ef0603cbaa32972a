"""Random, seeded instances of the differential harness (``tests/differential.py``).

One instance: a feature space of 2-5 features (continuous with ranges from 1e-3 to 1e6,
integers with small, negative and wide ranges, binaries, categoricals, ordinals,
constant columns; immutables, increase-/decrease-only; min-max, standard or no
scaling), a tiny model of one family fitted on ``space.transform`` of 60 random rows,
a factual row, a target (the other class; a multiclass label, a list of labels or
``None``; a regressor's interval), an objective and sometimes a cap on changes. Labels
come from a random linear score (multiclass: half the time with skewed priors, so that
some class can never beat another one); a network family has discrete features only in
40 % of its instances (exact grid references).
``make_instance(seed, family, case)`` is deterministic. Cases:

* ``multiclass_set``: a multiclass target that is a list of labels or ``None``;
* ``near_threshold`` (tree families): a continuous feature of the factual exactly on a
  split threshold (raw units), or one float32 / float64 ulp away, sometimes immutable;
* ``near_boundary`` (linear and network families): the output bias shifted so that the
  factual's score is within 1e-9 of the decision boundary on the wrong side (float32
  networks: as close as float32 allows); regressors: the target interval starts within
  1e-9 of the factual's prediction;
* ``extreme_scale``: a feature of range <= 1e-2 beside one of range >= 1e5;
* ``per_query_trees`` (tree families): the trees are built per query;
* ``custom``: one to three rules and objective terms of the user's own on the small
  discrete features (``tests/differential_custom.py``): declared blocks, raw Pyomo
  constraints and blocks, terms added to the objective;
* ``narrowed``: DiCE's per-query ``features_to_vary`` and ``permitted_range``
  (``tests/differential_narrowing.py``).

``per_query_trees``, ``custom`` and ``narrowed`` are drawn after the rest, each from a
random stream of its own (a seed's other draws do not depend on them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

import cfopt

from .differential_models import (
    CLASSIFIERS,
    FAMILIES,
    LINEAR_FAMILIES,
    NETWORK_FAMILIES,
    REGRESSORS,
    TREE_FAMILIES,
    classes_of,
    fit_model,
    predict,
    raw_scores,
    shift_output_bias,
    split_thresholds,
)

if TYPE_CHECKING:
    from .differential_custom import Component

CASES = ("multiclass_set", "near_threshold", "near_boundary", "extreme_scale",
         "per_query_trees", "custom", "narrowed")
#: share of tree instances whose explainer builds its trees per query, on the leaves
#: within the heuristic's radius (cfopt/formulations/tree_regions.py), as it does for
#: forests of default size; drawn from a stream of its own (the other draws unchanged)
PER_QUERY_SHARE = 0.35
#: share of instances drawing custom components (those without a small discrete mutable
#: feature draw none: 25-45 % of a family's instances are ``custom``)
CUSTOM_SHARE = 0.45
#: the streams of the ``custom`` draws: ``default_rng([seed, CUSTOM_STREAM])`` decides,
#: ``default_rng([seed, CUSTOM_STREAM + 1, attempt])`` draws the components (numpy's seed
#: sequences ignore trailing zeros: ``[seed, CUSTOM_STREAM, 0]`` is the decision's stream)
CUSTOM_STREAM = 130363
N_ROWS = 60
MARGIN = 1e-3
MIP_GAP = 1e-4
TIME_LIMIT = 20.0
_KINDS = ("continuous", "integer", "wide_integer", "binary", "categorical", "ordinal", "constant")
_KIND_P = (0.32, 0.14, 0.10, 0.12, 0.12, 0.12, 0.08)
_DISCRETE_P = (0.0, 0.3, 0.0, 0.2, 0.2, 0.2, 0.1)


@dataclass
class Instance:
    """One query of the declared problem (see ``tests/differential.py``)."""

    seed: int
    family: str
    task: str  # "binary", "multiclass" or "regression"
    cases: tuple[str, ...]
    frame: pd.DataFrame  # the training rows (spreads of the L1 weights)
    space: cfopt.FeatureSpace
    model: Any
    x: pd.DataFrame  # the factual, one raw row
    target: Any  # as given to ``explain``
    labels: tuple  # target classes, or (low, high) with infinite open sides
    objective: str
    max_changes: int | None
    scaling: str
    notes: dict[str, Any] = field(default_factory=dict)
    forced_case: str | None = None  # the ``case`` given to ``make_instance``
    margin: float = MARGIN
    mip_gap: float = MIP_GAP
    time_limit: float = TIME_LIMIT
    per_query_trees: bool = False  # the trees are built per query (``PER_QUERY_TERMS`` 0)
    custom: list[Component] = field(default_factory=list)  # the ``custom`` case's components
    narrowing: dict[str, Any] = field(default_factory=dict)  # ``explain``'s narrowing options

    @property
    def classes(self) -> tuple:
        return classes_of(self.model)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary (the seed and family rebuild the instance)."""
        return {"seed": self.seed, "family": self.family, "task": self.task,
                "cases": list(self.cases), "objective": self.objective,
                "max_changes": self.max_changes, "scaling": self.scaling,
                "target": _jsonable(self.target), "model": type(self.model).__name__,
                "factual": {k: _jsonable(v) for k, v in self.x.iloc[0].items()},
                "features": [f"{f.name}:{f.kind.value}[{f.lower},{f.upper}]"
                             f"{'/immutable' if f.immutable else ''}"
                             f"{'' if f.direction == 'any' else '/' + f.direction}"
                             for f in self.space], "notes": self.notes,
                "custom": [c.describe() for c in self.custom],
                "narrowing": _jsonable(self.narrowing)}


def make_instance(seed: int, family: str | None = None, case: str | None = None, *,
                  later_cases: bool = True) -> Instance:
    """The instance of ``seed`` (``family``: by default the seed's turn in
    :data:`FAMILIES`); ``case`` forces one of :data:`CASES` (it must apply to the family);
    ``later_cases=False``: no custom components and no narrowing unless forced (the
    instance as it was before those cases: the findings' seeds)."""
    family = family or FAMILIES[seed % len(FAMILIES)]
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families are {FAMILIES}")
    if case is not None and case not in applicable_cases(family):
        raise ValueError(f"case {case!r} does not apply to {family!r}")
    from . import differential_narrowing as narrowing
    from .differential_custom import draw  # it reads the references

    own_case = None if case in ("per_query_trees", "custom", "narrowed") else case
    for attempt in range(100):
        instance = _attempt(seed, family, own_case, np.random.default_rng([seed, attempt]))
        if instance is None:
            continue
        instance.notes["attempt"] = attempt
        instance.forced_case = case
        if family in TREE_FAMILIES and (case == "per_query_trees" or (
                case is None and
                np.random.default_rng([seed, 104729]).random() < PER_QUERY_SHARE)):
            instance.per_query_trees = True
            instance.cases += ("per_query_trees",)
        if case == "custom" or (case is None and later_cases and np.random.default_rng(
                [seed, CUSTOM_STREAM]).random() < CUSTOM_SHARE):
            if draw(instance, np.random.default_rng([seed, CUSTOM_STREAM + 1, attempt])):
                instance.cases += ("custom",)
            elif case == "custom":
                continue
        if case == "narrowed" or (case is None and later_cases and np.random.default_rng(
                [seed, narrowing.NARROWED_STREAM]).random() < narrowing.NARROWED_SHARE):
            if narrowing.draw(instance, np.random.default_rng(
                    [seed, narrowing.NARROWED_STREAM + 1, attempt])):
                instance.cases += ("narrowed",)
            elif case == "narrowed":
                continue
        return instance
    raise RuntimeError(f"no valid instance for seed {seed}, family {family!r}, case {case!r}")


def applicable_cases(family: str) -> tuple[str, ...]:
    """The cases ``make_instance`` can force for a family."""
    cases = ["extreme_scale", "custom", "narrowed"]
    if family in CLASSIFIERS:
        cases.append("multiclass_set")
    if family in TREE_FAMILIES:
        cases += ["near_threshold", "per_query_trees"]
    if family in LINEAR_FAMILIES | NETWORK_FAMILIES:
        cases.append("near_boundary")
    return tuple(c for c in CASES if c in cases)


def _attempt(seed: int, family: str, case: str | None,
             rng: np.random.Generator) -> Instance | None:
    if family in REGRESSORS:
        task = "regression"
    elif case == "multiclass_set" or (case is None and rng.random() < 0.35):
        task = "multiclass"
    else:
        task = "binary"
    wanted = {case} if case else {c for c in applicable_cases(family) if c != "multiclass_set"
                                  and rng.random() < 0.2}
    frame, kinds = _frame(rng, family, "extreme_scale" in wanted, "near_threshold" in wanted)
    scaling = str(rng.choice(["minmax", "standard", "none"]))
    space = cfopt.FeatureSpace.from_frame(frame, scaling=scaling, kinds=kinds)
    _actionability(space, rng)
    Z = space.transform(frame)
    n_classes = 0 if task == "regression" else (2 if task == "binary" else int(rng.integers(3, 5)))
    y = _labels(rng, Z, n_classes)
    if n_classes and (len(y) == 0 or len(np.unique(y)) < n_classes):
        return None
    model = fit_model(family, Z, y, n_classes, rng, seed)
    classes = classes_of(model)
    if n_classes and len(classes) != n_classes:
        return None
    x = frame.iloc[[int(rng.integers(N_ROWS))]].reset_index(drop=True)
    notes: dict[str, Any] = {}
    if "near_threshold" in wanted and not _near_threshold(space, model, x, rng, notes):
        return None
    if "near_boundary" in wanted and task != "regression" and \
            not _near_boundary(space, model, x, rng, notes):
        return None
    Z0 = space.transform(x)
    if task == "regression":
        found = _interval(model, Z, Z0, rng, "near_boundary" in wanted, notes)
        if found is None:
            return None
        target, labels, is_set = found
    else:
        target, labels, is_set = _classes_target(classes, predict(model, Z0)[0], rng,
                                                 case == "multiclass_set")
    cases = [c for c in ("near_threshold", "near_boundary") if c in notes]
    if is_set:
        cases.append("multiclass_set")
    if _extreme(space):
        cases.append("extreme_scale")
    if case is not None and case not in cases:
        return None
    instance = Instance(seed, family, task, tuple(c for c in CASES if c in cases), frame, space,
                        model, x, target, labels,
                        str(rng.choice(["l1", "l1", "l1", "l0", "linf"])),
                        [None, None, None, 1, 2, 3][int(rng.integers(6))], scaling, notes)
    from .differential_reference import admissible, reference_size  # it reads instances

    movable = any(len(admissible(instance, f) or [0, 1]) > 1 for f in space)
    return instance if movable and reference_size(instance) is not None else None


# ---------------------------------------------------------------------- features
def _frame(rng: np.random.Generator, family: str, extreme: bool,
           threshold: bool) -> tuple[pd.DataFrame, dict[str, str]]:
    """Random raw training rows and their declared kinds."""
    n = int(rng.integers(2, 6))
    discrete_only = family in NETWORK_FAMILIES and rng.random() < 0.4 and not (extreme or
                                                                                threshold)
    kinds = list(rng.choice(_KINDS, size=n, p=_DISCRETE_P if discrete_only else _KIND_P))
    widths: list[float | None] = [None] * n
    if extreme:
        kinds[0], widths[0] = "continuous", float(rng.choice([1e-3, 1e-2]))
        kinds[1] = str(rng.choice(["continuous", "wide_integer"]))
        widths[1] = float(rng.choice([1e5, 1e6]))
    if threshold and "continuous" not in kinds:
        kinds[-1] = "continuous"
    columns: dict[str, Any] = {}
    declared: dict[str, str] = {}
    for k, (kind, width) in enumerate(zip(kinds, widths)):
        name = f"{kind[:4]}{k}"
        columns[name], declared[name] = _column(rng, str(kind), width)
    return pd.DataFrame(columns), declared


def _column(rng: np.random.Generator, kind: str, width: float | None) -> tuple[Any, str]:
    if kind == "continuous":
        width = width or float(rng.choice([1e-3, 1e-2, 1.0, 250.0, 5e4, 1e6]))
        low = float(rng.choice([0.0, -width / 2, 10 * width]))
        v = rng.random(N_ROWS)
        return low + width * (np.round(v, 1) if rng.random() < 0.3 else v), "continuous"
    if kind in ("integer", "wide_integer"):
        if width is None:
            width = float(rng.choice([2, 5, 20, 40] if kind == "integer" else [1e3, 1e5, 1e6]))
        low = int(rng.choice([0, -int(width) // 2, -100 if kind == "integer" else 0]))
        return rng.integers(low, low + int(width) + 1, N_ROWS), "integer"
    if kind == "binary":
        return rng.integers(0, 2, N_ROWS), "binary"
    if kind == "categorical":
        levels = [f"c{i}" for i in range(int(rng.integers(2, 5)))]
        return rng.choice(levels, N_ROWS), "categorical"
    if kind == "ordinal":
        levels = [f"o{i}" for i in range(int(rng.integers(3, 6)))]
        return pd.Categorical(rng.choice(levels, N_ROWS), categories=levels,
                              ordered=True), "ordinal"
    value = float(rng.choice([0.0, 3.5, -7.0]))  # a constant column
    return (np.full(N_ROWS, value), "continuous") if rng.random() < 0.5 else \
        (np.full(N_ROWS, int(value)), "integer")


def _actionability(space: cfopt.FeatureSpace, rng: np.random.Generator) -> None:
    for f in space:
        u = rng.random()
        if u < 0.1:
            space.immutable(f.name)
        elif f.is_onehot:
            continue
        elif u < 0.2:
            space.increase_only(f.name)
        elif u < 0.3:
            space.decrease_only(f.name)


def _extreme(space: cfopt.FeatureSpace) -> bool:
    widths = [f.upper - f.lower for f in space if not f.is_onehot and f.upper > f.lower]
    return any(w <= 1e-2 for w in widths) and any(w >= 1e5 for w in widths)


def _labels(rng: np.random.Generator, Z: np.ndarray, n_classes: int) -> np.ndarray:
    """Labels of a random linear score of the standardized inputs (empty when a class
    has fewer than two rows)."""
    std = Z.std(axis=0)
    Zs = (Z - Z.mean(axis=0)) / np.where(std > 0, std, 1.0)
    if n_classes == 0:
        return 10 * Zs @ rng.normal(size=Z.shape[1]) + 3 * np.abs(Zs @ rng.normal(
            size=Z.shape[1]))
    if n_classes == 2:
        score = Zs @ rng.normal(size=Z.shape[1])
        return (score > np.median(score)).astype(int)
    scores = Zs @ rng.normal(size=(Z.shape[1], n_classes))
    if rng.random() < 0.5:  # skewed priors: a dominant class beside rare ones
        scores += rng.normal(0.0, 1.5, n_classes) * scores.std()
    y = scores.argmax(axis=1)
    return y if np.bincount(y, minlength=n_classes).min() >= 2 else np.zeros(0, dtype=int)


# ------------------------------------------------------------------------- cases
def _near_threshold(space: cfopt.FeatureSpace, model: Any, x: pd.DataFrame,
                    rng: np.random.Generator, notes: dict[str, Any]) -> bool:
    """Put a continuous feature of the factual on (or one ulp from) a split threshold."""
    thresholds, *_ = split_thresholds(model)
    slices = space.input_slices()
    options = [f for f in space if f.kind.value == "continuous" and f.upper > f.lower
               and slices[f.name].start in thresholds]
    if not options:
        return False
    f = options[int(rng.integers(len(options)))]
    t = float(rng.choice(thresholds[slices[f.name].start]))
    variant = str(rng.choice(["on", "float32_up", "float32_down", "float64_up", "float64_down"]))
    side = np.inf if variant.endswith("up") else -np.inf
    if variant.startswith("float32"):
        u = float(np.nextafter(np.float32(t), np.float32(side)))
        value = u * f.scale + f.shift
    else:
        value = t * f.scale + f.shift
        if variant.startswith("float64"):
            value = float(np.nextafter(value, side))
    value = min(max(value, f.lower), f.upper)
    x[f.name] = value
    immutable = bool(rng.random() < 0.5)
    if immutable:
        space.immutable(f.name)
    notes["near_threshold"] = {"feature": f.name, "threshold": t, "variant": variant,
                               "value": value, "immutable": immutable}
    return True


def _near_boundary(space: cfopt.FeatureSpace, model: Any, x: pd.DataFrame,
                   rng: np.random.Generator, notes: dict[str, Any]) -> bool:
    """Shift the output bias so that the factual's score is within 1e-9 of the boundary
    (on its current class's side; float32 networks: as close as float32 allows)."""
    Z0 = space.transform(x)
    classes = classes_of(model)
    c0 = predict(model, Z0)[0]
    scores = raw_scores(model, Z0)[0]
    delta = float(rng.uniform(1e-12, 1e-9))
    if len(classes) == 2:  # the class-1 score: > 0 is class 1, <= 0 class 0
        unit, up = 0, c0 == classes[1]
        shift_output_bias(model, 0, (delta if up else -rng.choice([0.0, delta])) - scores)
    else:
        unit, up = classes.index(c0), True
        runner_up = np.sort(scores)[-2]
        shift_output_bias(model, unit, delta - (scores[unit] - runner_up))
    step = 1e-12
    for _ in range(200):  # float32 models: walk the bias back to the factual's side
        if predict(model, Z0)[0] == c0:
            break
        shift_output_bias(model, unit, step if up else -step)
        step *= 1.5
    else:
        return False
    score = raw_scores(model, Z0)[0]
    gap = float(score) if len(classes) == 2 else float(np.sort(score)[-1] - np.sort(score)[-2])
    notes["near_boundary"] = {"unit": unit, "score_gap": gap}
    return True


def _interval(model: Any, Z: np.ndarray, Z0: np.ndarray, rng: np.random.Generator,
              boundary: bool, notes: dict[str, Any]) -> tuple[tuple, tuple, bool] | None:
    """A regressor's target interval not containing the factual's prediction (``None``
    for a model that is constant on the data)."""
    p0 = float(np.asarray(model.predict(Z0))[0])
    spread = float(np.std(model.predict(Z)))
    if spread < 1e-6 * (1 + abs(p0)):
        return None
    a = float(rng.uniform(1e-12, 1e-9)) if boundary else float(rng.choice([0.05, 0.3, 1.0])) * spread
    b = float(rng.choice([0.1, 1.0])) * spread
    up = rng.random() < 0.5
    shape = int(rng.integers(2 if boundary else 3))
    low, high = (p0 + a, None if shape == 0 else p0 + a + b) if up else \
        (None if shape == 0 else p0 - a - b, p0 - a)
    labels = (-np.inf if low is None else low, np.inf if high is None else high)
    if not (labels[0] < labels[1] and (p0 < labels[0] or p0 > labels[1])):
        return None
    if boundary:
        notes["near_boundary"] = {"prediction": p0, "distance": a}
    return (low, high), labels, False


def _classes_target(classes: tuple, current: Any, rng: np.random.Generator,
                    force_set: bool) -> tuple[Any, tuple, bool]:
    """The target (as given to ``explain``), its labels, and whether it is a set."""
    others = [c for c in classes if c != current]
    if len(classes) == 2:
        return others[0], (others[0],), False
    mode = str(rng.choice(["list", "none"] if force_set else ["single", "list", "none"]))
    if mode == "none":
        return None, tuple(others), True
    if mode == "list" and len(others) >= 2:
        chosen = sorted(rng.choice(len(others), size=2, replace=False))
        labels = tuple(others[i] for i in chosen)
        return list(labels), labels, True
    label = others[int(rng.integers(len(others)))]
    return label, (label,), False


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
