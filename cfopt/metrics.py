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

Validity and constraint violations come from the model and the problem
(:meth:`Counterfactual.verified`, :meth:`CounterfactualModel.violations`).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from .features import FeatureSpace


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
