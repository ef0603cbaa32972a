r"""Quality metrics of counterfactuals, shared by every benchmark.

For a factual :math:`\hat x` and :math:`k` counterfactuals :math:`x_1..x_k` over
features split into continuous :math:`C` (numeric, unlabelled) and categorical
:math:`K` (labelled: categorical, ordinal, labelled binary), with :math:`d` features
(DiCE's definitions, as CE-OCL reports them):

* ``cont_proximity`` :math:`= -\frac1k \sum_i \sum_{j \in C} |\hat x_j - x_{ij}|` (raw
  units; ``"mad"``: each term divided by feature :math:`j`'s median absolute deviation,
  1 when it is 0);
* ``cat_proximity`` :math:`= 1 - \frac{\#\{(i, j \in K): x_{ij} \ne \hat x_j\}}{k|K|}`;
* ``sparsity`` :math:`= 1 - \frac{\#\{(i, j): x_{ij} \ne \hat x_j\}}{k\,d}`;
* over the :math:`\binom k2` pairs: ``cont_diversity`` (mean raw L1 over :math:`C`),
  ``cat_diversity`` (mean fraction of :math:`K` that differ), ``sparsity_diversity``
  (mean fraction of all features that differ);
* ``lof``: the local outlier factor of each counterfactual among the data of its
  class (sklearn, 10 neighbours, fitted on that data plus the counterfactual, in the
  feature space's encoding; ~1 inlier, larger is more outlying);
* ``ynn``: the fraction of a counterfactual's ``n`` nearest data points (encoding,
  L1) that the model classifies like the counterfactual.

Set metrics of Leofante & Potyka (AAAI 2024), with distances in min-max units (a
category change counts 1; :func:`distance_weights`) under L1 or L2: ``k_distance``,
``k_diversity``, ``setdist_sum`` and ``setdist_max`` (Eqs. 4-5, 12-13).

Metrics of Shekhar et al. (MD-PSO counterfactuals, Eqs. 8-15; lower proximity and
sparsity are better): ``proximity_cont`` (MAD-normalised L1 averaged over continuous
features), ``proximity_cat``, ``changed_fraction`` (their sparsity), ``pso_proximity``,
``pso_diversity``, ``normalised_diversity``, ``coverage``; ``pso_summary`` gives all.

Validity and constraint violations come from the model and the problem
(:meth:`Counterfactual.verified`, :meth:`CounterfactualModel.violations`).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from .space.space import FeatureSpace


def _split(space: FeatureSpace) -> tuple[list[str], list[str]]:
    continuous = [f.name for f in space if not f.labelled]
    categorical = [f.name for f in space if f.labelled]
    return continuous, categorical


def _codes(space: FeatureSpace, frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    return np.array([[space[n].to_code(v) for n, v in zip(names, row)]
                     for row in frame[names].itertuples(index=False)], dtype=float
                    ).reshape(len(frame), len(names))


def cont_proximity(space: FeatureSpace, factual: pd.DataFrame, counterfactuals: pd.DataFrame,
                   scale: str = "raw") -> float:
    """Negative mean L1 distance over continuous features (``scale``: raw or mad)."""
    continuous, _ = _split(space)
    if not continuous or not len(counterfactuals):
        return 0.0
    diff = np.abs(_codes(space, counterfactuals, continuous)
                  - _codes(space, factual, continuous))
    if scale == "mad":
        mad = np.array([space[n].mad or 1.0 for n in continuous])
        diff = diff / np.where(mad > 0, mad, 1.0)
    elif scale != "raw":
        raise ValueError(f"scale must be 'raw' or 'mad', got {scale!r}")
    return float(-diff.sum(axis=1).mean())


def cat_proximity(space: FeatureSpace, factual: pd.DataFrame,
                  counterfactuals: pd.DataFrame) -> float | None:
    """1 - the fraction of categorical entries that differ (None: no categoricals)."""
    _, categorical = _split(space)
    if not categorical or not len(counterfactuals):
        return None
    mismatch = (counterfactuals[categorical].to_numpy()
                != factual[categorical].to_numpy()[0]).mean()
    return float(1.0 - mismatch)


def sparsity(space: FeatureSpace, factual: pd.DataFrame, counterfactuals: pd.DataFrame) -> float:
    """1 - the fraction of (counterfactual, feature) entries that differ."""
    if not len(counterfactuals):
        return 0.0
    names = space.names
    changed = counterfactuals[names].to_numpy() != factual[names].to_numpy()[0]
    return float(1.0 - changed.mean())


def diversity(space: FeatureSpace, counterfactuals: pd.DataFrame) -> dict[str, float | None]:
    """``cont_diversity``, ``cat_diversity`` and ``sparsity_diversity`` averaged over the
    pairs of counterfactuals (``None`` with fewer than two)."""
    keys = ("cont_diversity", "cat_diversity", "sparsity_diversity")
    if len(counterfactuals) < 2:
        return dict.fromkeys(keys)
    continuous, categorical = _split(space)
    codes = _codes(space, counterfactuals, continuous) if continuous else None
    cats = counterfactuals[categorical].to_numpy() if categorical else None
    full = counterfactuals[space.names].to_numpy()
    cont, cat, sparse = [], [], []
    for a, b in combinations(range(len(counterfactuals)), 2):
        cont.append(float(np.abs(codes[a] - codes[b]).sum()) if codes is not None else 0.0)
        if cats is not None:
            cat.append(float((cats[a] != cats[b]).mean()))
        sparse.append(float((full[a] != full[b]).mean()))
    return {"cont_diversity": float(np.mean(cont)),
            "cat_diversity": float(np.mean(cat)) if cat else None,
            "sparsity_diversity": float(np.mean(sparse))}


def lof(space: FeatureSpace, counterfactuals: pd.DataFrame, data: pd.DataFrame,
        n_neighbors: int = 10) -> np.ndarray:
    """Local outlier factor of each counterfactual among ``data`` (e.g. the training rows
    of the counterfactual's class), fitted on ``data`` plus that counterfactual."""
    from sklearn.neighbors import LocalOutlierFactor

    Z = space.transform(data, check_bounds=False)
    C = space.transform(counterfactuals, check_bounds=False)
    out = []
    for c in C:
        model = LocalOutlierFactor(n_neighbors=min(n_neighbors, len(Z)))
        model.fit(np.vstack([Z, c]))
        out.append(-model.negative_outlier_factor_[-1])
    return np.array(out)


def ynn(space: FeatureSpace, counterfactuals: pd.DataFrame, data: pd.DataFrame,
        data_classes: np.ndarray, cf_classes: np.ndarray, n: int = 5) -> float:
    """Mean over counterfactuals of the fraction of their ``n`` nearest data rows (L1 on
    the encoding) whose class (``data_classes``) equals theirs (``cf_classes``)."""
    Z = space.transform(data, check_bounds=False)
    C = space.transform(counterfactuals, check_bounds=False)
    data_classes = np.asarray(data_classes, dtype=object)
    scores = []
    for c, cls in zip(C, np.asarray(cf_classes, dtype=object)):
        nearest = np.argsort(np.abs(Z - c).sum(axis=1), kind="stable")[:n]
        scores.append(float((data_classes[nearest] == cls).mean()))
    return float(np.mean(scores)) if scores else 0.0


def summary(space: FeatureSpace, factual: pd.DataFrame,
            counterfactuals: pd.DataFrame) -> dict[str, float | None]:
    """The CE-OCL / DiCE scores of one factual's counterfactual set."""
    return {"cat_proximity": cat_proximity(space, factual, counterfactuals),
            "cont_proximity": cont_proximity(space, factual, counterfactuals),
            "sparsity": sparsity(space, factual, counterfactuals),
            **diversity(space, counterfactuals)}


# --------------------------------------------------------------------------------------
# Distances in min-max units and the set metrics of Leofante & Potyka (AAAI 2024)

#: the norms of the set metrics (:func:`distance_weights`)
NORMS = ("l1", "l2")


def check_norm(norm: str) -> None:
    """``ValueError`` unless ``norm`` is one of :data:`NORMS`."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def distance_weights(space: FeatureSpace, norm: str = "l1") -> np.ndarray:
    r"""Per model input, the factor :math:`a_j` that turns model-input differences into
    min-max units: :math:`d(x, y) = \|(z(x) - z(y)) \odot a\|_p` with :math:`z` =
    ``space.transform``.

    A numeric feature (continuous, integer, binary, ordinal code) contributes
    :math:`|\Delta\,\mathrm{code}| / \mathrm{range}` (its data range, else its bounds'
    width; the weights of cfopt's default L1 objective); a categorical feature
    contributes 1 when its level differs (each of its two changed one-hot columns is
    weighted 1/2 under L1 and :math:`1/\sqrt2` under L2), so a category change counts
    once under both norms.
    """
    check_norm(norm)
    onehot = 0.5 if norm == "l1" else 1.0 / np.sqrt(2.0)
    weights: list[float] = []
    for f in space:
        if f.is_onehot:
            weights.extend(onehot for _ in f.categories)
        else:
            weights.append(f.scale / f.weight_spread)
    return np.array(weights)


def distance_matrix(space: FeatureSpace, A: pd.DataFrame, B: pd.DataFrame,
                    norm: str = "l1") -> np.ndarray:
    """Pairwise distances (len(A), len(B)) between raw rows in min-max units
    (see :func:`distance_weights`), ``norm`` ``"l1"`` or ``"l2"``."""
    a = distance_weights(space, norm)
    ua = space.transform(A, check_bounds=False) * a
    ub = space.transform(B, check_bounds=False) * a
    diff = ua[:, None, :] - ub[None, :, :]
    if norm == "l1":
        return np.abs(diff).sum(axis=2)
    return np.sqrt((diff ** 2).sum(axis=2))


def _nonempty(frame: pd.DataFrame, what: str) -> None:
    if not len(frame):
        raise ValueError(f"{what} is empty; the set metrics need at least one counterfactual")


def k_distance(space: FeatureSpace, factual: pd.DataFrame, counterfactuals: pd.DataFrame,
               norm: str = "l1") -> float:
    r"""k-distance (Leofante & Potyka, Eq. 12, after Mohammadi et al. 2021): the mean
    distance :math:`\frac1{|S|}\sum_j d(x, x'_j)` of the counterfactuals to the factual."""
    _nonempty(counterfactuals, "the counterfactual set")
    return float(distance_matrix(space, factual.iloc[[0]], counterfactuals, norm).mean())


def k_diversity(space: FeatureSpace, counterfactuals: pd.DataFrame,
                norm: str = "l1") -> float | None:
    r"""k-diversity (Leofante & Potyka, Eq. 13): the mean pairwise distance
    :math:`\binom{|S|}{2}^{-1}\sum_{j<l} d(x'_j, x'_l)`; ``None`` with fewer than two
    counterfactuals (the authors' code counts such a set as 0)."""
    if len(counterfactuals) < 2:
        return None
    D = distance_matrix(space, counterfactuals, counterfactuals, norm)
    return float(D[np.triu_indices(len(D), k=1)].mean())


def setdist_sum(space: FeatureSpace, first: pd.DataFrame, second: pd.DataFrame,
                norm: str = "l1") -> float:
    r"""set-distance\ :sub:`Σ` (Leofante & Potyka, Eq. 4): the symmetrised mean distance
    of each counterfactual to its nearest member of the other set,
    :math:`\frac12\,\mathrm{mean}_{c_1\in S_1}\min_{c_2\in S_2} d(c_1, c_2) +
    \frac12\,\mathrm{mean}_{c_2\in S_2}\min_{c_1\in S_1} d(c_1, c_2)`."""
    _nonempty(first, "the first set")
    _nonempty(second, "the second set")
    D = distance_matrix(space, first, second, norm)
    return float(0.5 * D.min(axis=1).mean() + 0.5 * D.min(axis=0).mean())


def setdist_max(space: FeatureSpace, first: pd.DataFrame, second: pd.DataFrame,
                norm: str = "l1") -> float:
    r"""set-distance\ :sub:`max` (Leofante & Potyka, Eq. 5): as :func:`setdist_sum` with
    the maximum instead of the mean,
    :math:`\frac12\max_{c_1}\min_{c_2} d + \frac12\max_{c_2}\min_{c_1} d` (a symmetrised
    Hausdorff distance)."""
    _nonempty(first, "the first set")
    _nonempty(second, "the second set")
    D = distance_matrix(space, first, second, norm)
    return float(0.5 * D.min(axis=1).max() + 0.5 * D.min(axis=0).max())


# --------------------------------------------------------------------------------------
# The metrics of Shekhar et al. (MD-PSO counterfactuals, Eqs. 8-15)


def _mad_units(space: FeatureSpace, factual: pd.DataFrame, counterfactuals: pd.DataFrame,
               names: list[str]) -> np.ndarray:
    """|x_cf - x0| / MAD per (counterfactual, continuous feature); MAD 0 or unknown -> 1."""
    mad = np.array([space[n].mad or 0.0 for n in names])
    diff = np.abs(_codes(space, counterfactuals, names) - _codes(space, factual, names))
    return diff / np.where(mad > 0, mad, 1.0)


def proximity_cont(space: FeatureSpace, factual: pd.DataFrame,
                   counterfactuals: pd.DataFrame) -> float | None:
    r"""Shekhar et al. Eqs. 8-9: :math:`\frac1k\sum_i \frac1{n_{cont}}\sum_j
    |x^i_{cf,j} - x_{0,j}| / \mathrm{MAD}_j` over the continuous (unlabelled numeric)
    features; lower is closer. A feature whose median absolute deviation is 0 (or
    unknown to the space) is divided by 1 instead, i.e. measured in raw units (DiCE's
    convention; dividing by 0 would make any change of it infinite). ``None`` without
    continuous features or counterfactuals."""
    continuous, _ = _split(space)
    if not continuous or not len(counterfactuals):
        return None
    return float(_mad_units(space, factual, counterfactuals, continuous).mean())


def proximity_cat(space: FeatureSpace, factual: pd.DataFrame,
                  counterfactuals: pd.DataFrame) -> float | None:
    r"""Shekhar et al. Eqs. 10-11: the mean fraction of categorical (labelled) features
    that differ from the factual (:math:`1 -` :func:`cat_proximity`); lower is closer."""
    value = cat_proximity(space, factual, counterfactuals)
    return None if value is None else 1.0 - value


def changed_fraction(space: FeatureSpace, factual: pd.DataFrame,
                     counterfactuals: pd.DataFrame) -> float | None:
    r"""Shekhar et al.'s *sparsity* (Eqs. 12-13): the mean fraction of the :math:`p`
    features changed (:math:`1 -` DiCE's :func:`sparsity`); lower is sparser."""
    if not len(counterfactuals):
        return None
    return 1.0 - sparsity(space, factual, counterfactuals)


def _pso_distance(space: FeatureSpace, A: pd.DataFrame, B: pd.DataFrame) -> np.ndarray:
    """d(a, b) = d_cont + d_cat (Eqs. 9 and 11) for every pair (len(A), len(B))."""
    continuous, categorical = _split(space)
    D = np.zeros((len(A), len(B)))
    if continuous:
        mad = np.array([space[n].mad or 0.0 for n in continuous])
        a = _codes(space, A, continuous) / np.where(mad > 0, mad, 1.0)
        b = _codes(space, B, continuous) / np.where(mad > 0, mad, 1.0)
        D += np.abs(a[:, None, :] - b[None, :, :]).mean(axis=2)
    if categorical:
        a, b = A[categorical].to_numpy(), B[categorical].to_numpy()
        D += (a[:, None, :] != b[None, :, :]).mean(axis=2)
    return D


def pso_proximity(space: FeatureSpace, factual: pd.DataFrame,
                  counterfactuals: pd.DataFrame) -> float | None:
    r"""The single *proximity* of Shekhar et al.'s Table II as we read it: the mean over
    counterfactuals of :math:`d(x_{cf}, x_0) = d_{cont} + d_{cat}` (Eqs. 9 and 11), i.e.
    ``proximity_cont + proximity_cat`` (a missing kind contributes 0)."""
    if not len(counterfactuals):
        return None
    return float(_pso_distance(space, counterfactuals, factual.iloc[[0]]).mean())


def pso_diversity(space: FeatureSpace, counterfactuals: pd.DataFrame) -> float | None:
    r"""Shekhar et al. Eq. 14: the mean of :math:`d(x^i_{cf}, x^j_{cf})` over the
    :math:`\binom k2` pairs (``d`` as in :func:`pso_proximity`); ``None`` below two."""
    if len(counterfactuals) < 2:
        return None
    D = _pso_distance(space, counterfactuals, counterfactuals)
    return float(D[np.triu_indices(len(D), k=1)].mean())


def normalised_diversity(space: FeatureSpace, factual: pd.DataFrame,
                         counterfactuals: pd.DataFrame) -> float | None:
    r"""Shekhar et al. Eq. 15: the mean over pairs of
    :math:`d(x^i, x^j) / (d(x^i, x_0) + d(x^j, x_0))`. A pair whose denominator is 0
    (both equal the factual, hence each other) contributes 0. ``None`` below two."""
    if len(counterfactuals) < 2:
        return None
    D = _pso_distance(space, counterfactuals, counterfactuals)
    prox = _pso_distance(space, counterfactuals, factual.iloc[[0]])[:, 0]
    i, j = np.triu_indices(len(D), k=1)
    den = prox[i] + prox[j]
    ratio = np.divide(D[i, j], den, out=np.zeros(len(i)), where=den > 0)
    return float(ratio.mean())


def coverage(n_valid: list[int] | np.ndarray, requested: int | None = None) -> float:
    """Shekhar et al.'s *coverage*: the fraction of queries whose output is valid — at
    least one valid counterfactual (``requested=None``; a query with none, or with only
    counterfactuals of the factual's class, is not covered), or at least ``requested``
    valid ones."""
    counts = np.asarray(n_valid)
    if not counts.size:
        raise ValueError("coverage needs at least one query")
    return float((counts >= (1 if requested is None else requested)).mean())


def pso_summary(space: FeatureSpace, factual: pd.DataFrame,
                counterfactuals: pd.DataFrame) -> dict[str, float | None]:
    """Shekhar et al.'s scores of one factual's valid counterfactuals: ``proximity``,
    ``proximity_cont``, ``proximity_cat``, ``sparsity`` (fraction changed),
    ``diversity``, ``norm_diversity``."""
    return {"proximity": pso_proximity(space, factual, counterfactuals),
            "proximity_cont": proximity_cont(space, factual, counterfactuals),
            "proximity_cat": proximity_cat(space, factual, counterfactuals),
            "sparsity": changed_fraction(space, factual, counterfactuals),
            "diversity": pso_diversity(space, counterfactuals),
            "norm_diversity": normalised_diversity(space, factual, counterfactuals)}


# ----------------------------------------------------------------------------------------
# Robustness to adverse perturbations (Virgolin & Fracaros 2023, §7 and App. B)
# ----------------------------------------------------------------------------------------


def cogs_loss(space: FeatureSpace, factual: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    r"""The cost of Virgolin & Fracaros's Eq. 9 without the validity term, per row:
    :math:`\tfrac12\,\text{Gower}(z, x) + \tfrac12\,\|z - x\|_0 / d` (Gower: the mean over
    features of :math:`|z_i - x_i|` / range, 1 per category mismatch; range = the data
    range the feature space records, else its bounds)."""
    x = factual.iloc[0] if isinstance(factual, pd.DataFrame) else factual
    d = len(space)
    gower = np.zeros(len(rows))
    changed = np.zeros(len(rows))
    for f in space:
        values = rows[f.name].to_numpy()
        if f.is_onehot:
            diff = (values != x[f.name]).astype(float)
        else:
            codes = np.array([f.to_code(v) for v in values])
            diff = np.abs(codes - f.to_code(x[f.name])) / f.weight_spread
        gower += diff
        changed += diff > 0
    return 0.5 * gower / d + 0.5 * changed / d


def invalidity(labels: np.ndarray | list, target: object) -> float:
    """Fraction of (perturbed) points not classified as ``target``."""
    labels = np.asarray(labels, dtype=object)
    if labels.size == 0:
        raise ValueError("invalidity of an empty set of points")
    return float(np.mean(labels != target))


def fixable(space: FeatureSpace, perturbed: pd.DataFrame, counterfactual: pd.DataFrame,
            plausibility: dict[str, str | None]) -> np.ndarray:
    """Per perturbed point: a plausible additional intervention leads back to the
    counterfactual (no feature marked ``=`` must move back; ``>=`` / ``<=`` features
    must move back the allowed way) — the paper's fixability (§7.2)."""
    z = counterfactual.iloc[0]
    ok = np.ones(len(perturbed), dtype=bool)
    for name, rule in plausibility.items():
        if rule is None:
            continue
        f = space[name]
        values = perturbed[name].to_numpy()
        if rule == "=" or f.is_onehot:
            ok &= values == z[name]
            continue
        back = f.to_code(z[name]) - np.array([f.to_code(v) for v in values])
        ok &= back >= 0 if rule == ">=" else back <= 0
    return ok


def relative_cost(space: FeatureSpace, factual: pd.DataFrame, counterfactual: pd.DataFrame,
                  perturbed: pd.DataFrame, perturbed_labels: np.ndarray | list, target: object,
                  ideal: float) -> np.ndarray:
    r"""Per perturbed point :math:`z'`: :math:`[c(x \to z) + c(z' \to z)] / c_{ideal}`,
    with :math:`c(z' \to z) = 0` when :math:`z'` is still classified as the target (§7.3);
    :math:`c` is :func:`cogs_loss` and ``ideal`` the cost of the counterfactual found
    without accounting for robustness."""
    if not ideal > 0:
        raise ValueError(f"the ideal cost must be positive, got {ideal!r}")
    base = float(cogs_loss(space, factual, counterfactual)[0])
    back = cogs_loss(space, counterfactual, perturbed)
    invalid = np.asarray(perturbed_labels, dtype=object) != target
    return (base + np.where(invalid, back, 0.0)) / ideal


def sparsity_loss(space: FeatureSpace, factual: pd.DataFrame, robust: pd.DataFrame,
                  plain: pd.DataFrame) -> int:
    """Features the robust counterfactual changes beyond the plain one's count."""
    x = factual.iloc[0]

    def count(row: pd.DataFrame) -> int:
        return sum(row.iloc[0][n] != x[n] for n in space.names)

    return int(count(robust) - count(plain))
