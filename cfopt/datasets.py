"""Data sets for examples, tests and benchmarks.

``load_german()`` reads the UCI Statlog German credit data bundled with cfopt. The
other loaders read from the *data home* (``$CFOPT_DATA_HOME`` if set, else a per-user
cache folder): the CARLA-processed recourse benchmarks (public repository
carla-recourse/cf-data, MIT licence) and the five data sets Virgolin & Fracaros
annotated with perturbations (:func:`load_virgolin`). A missing file is downloaded
from its public source and checked against its SHA-256; without a network (or for a
file without a public source) the loader raises :class:`~cfopt.DataNotFoundError`
saying where to put the file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from .errors import DataNotFoundError

_CARLA = "https://raw.githubusercontent.com/carla-recourse/cf-data/master/"
_VIRGOLIN = ("https://raw.githubusercontent.com/marcovirgolin/robust-counterfactuals/"
             "c19ccdea5034a650b538985e4bfa6064954bb02f/datasets/")

#: relative path in the data home -> (public URL, SHA-256)
REMOTE_FILES: dict[str, tuple[str, str]] = {
    "carla/adult.csv": (_CARLA + "adult.csv",
                        "e98ef37848b34919802d9e110718dd02ccbc8ec0369677f92bb1fd40b71eccdc"),
    "carla/adult_train.csv": (_CARLA + "adult_train.csv",
                              "949236c2502a3daa4b660ba35093ee133e1d152f865a5323768b0b7a50a8e292"),
    "carla/adult_test.csv": (_CARLA + "adult_test.csv",
                             "5fa0554e72173473f4f826ed28daec5f2ce76c3af7a9f1cb6fe3a806f87b6b6b"),
    "carla/compas.csv": (_CARLA + "compas.csv",
                         "e99430e4bdeebc858ba22726be3c3924c8435e6c890e2ae7f52d0411a3cc0516"),
    "carla/compas_train.csv": (_CARLA + "compas_train.csv",
                               "d9cab073348a902bc09e4e0792f2b73aab1c6e419db1da655bbad978f33b80cf"),
    "carla/compas_test.csv": (_CARLA + "compas_test.csv",
                              "6849f34e0edad380bfa3b62c5a947bd0a9122cc639496e3048f04c6c674127eb"),
    "carla/heloc.csv": (_CARLA + "heloc.csv",
                        "6a668dddbd2b59aed119c0169c562d54ad6a462580ca783628e88cbc59315d41"),
    "carla/heloc_train.csv": (_CARLA + "heloc_train.csv",
                              "92187da9daab7d1b074192d45d29fd3c1aca1f3cac8f37800780310ea7cf2b36"),
    "carla/heloc_test.csv": (_CARLA + "heloc_test.csv",
                             "56a00b4f7b96bf1020a8d05d3b61ea3a4bc6fe637376c0b929dceb3f319a0e58"),
    "carla/give_me_some_credit_test.csv": (
        _CARLA + "give_me_some_credit_test.csv",
        "3654b651e0bc5ce46c7ef3f807974a6e91c6669c8f5f0b5348556179d1f6df5e"),
    "virgolin/adult.csv": (_VIRGOLIN + "adult.csv",
                           "01fe8fa742b635bea254ec567080a56ca16192af95c6314dc380e89ca656c5bb"),
    "virgolin/garments_worker_productivity.csv": (
        _VIRGOLIN + "garments_worker_productivity.csv",
        "a2f26ea89c571f725eab5be5ebfaeb5569c2dcaa15b777ff14e06c3e93093aa3"),
    "virgolin/south_german_credit.csv": (
        _VIRGOLIN + "south_german_credit.csv",
        "cf734e018baed0207ba967f97a4685510acc7784b326473d27614e0c313320b2"),
    "virgolin/compas-scores-two-years.csv": (
        "https://raw.githubusercontent.com/propublica/compas-analysis/master/"
        "compas-scores-two-years.csv",
        "d180e410066da845eceb452417fbf8b119633f05526bcb29ef2c5b546d8946c5"),
}

#: data-home files without a stable public download, and where they come from
LOCAL_FILES: dict[str, str] = {
    "virgolin/annotations.json": (
        "the per-feature perturbation and plausibility annotations of Virgolin & Fracaros "
        "(transcribed from robust_cfe/dataproc.py of marcovirgolin/robust-counterfactuals)"),
    "virgolin/boston_housing.csv": (
        "the comma-separated Boston housing file (506 rows, 14 numbers, no header) used by "
        "marcovirgolin/robust-counterfactuals"),
}

Split = Literal["all", "train", "test"]


@dataclass
class Dataset:
    """A labelled data set: raw features ``X``, labels ``y`` (1 = favourable)."""

    name: str
    X: pd.DataFrame
    y: pd.Series
    source: str
    license: str

    @property
    def frame(self) -> pd.DataFrame:
        return pd.concat([self.X, self.y], axis=1)

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {self.X.shape[0]} rows x {self.X.shape[1]} features)"


def data_home() -> Path:
    """``$CFOPT_DATA_HOME``, else the user cache folder (e.g. ``~/.cache/cfopt``)."""
    env = os.environ.get("CFOPT_DATA_HOME")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
        return base / "cfopt" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "cfopt"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cfopt"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(relpath: str, *, download: bool = True, timeout: float = 60.0) -> Path:
    """Path of a data file in the data home, downloading it (checksum-verified) if
    missing."""
    if relpath not in REMOTE_FILES and relpath not in LOCAL_FILES:
        raise ValueError(f"unknown data file {relpath!r}; known: "
                         f"{sorted(REMOTE_FILES) + sorted(LOCAL_FILES)}")
    path = data_home() / relpath
    if path.exists():
        return path
    where = (f"place the file at {path} or set CFOPT_DATA_HOME to a folder holding "
             f"{relpath}")
    if relpath in LOCAL_FILES:
        raise DataNotFoundError(f"{relpath} is not in the data home ({data_home()}) and has no "
                                f"public download: it is {LOCAL_FILES[relpath]}; {where}")
    url, sha = REMOTE_FILES[relpath]
    if not download:
        raise DataNotFoundError(f"{relpath} is not in the data home ({data_home()}); {where}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=timeout) as response, \
                tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
            shutil.copyfileobj(response, tmp)
    except OSError as exc:
        raise DataNotFoundError(f"{relpath} is not in the data home ({data_home()}) and could "
                                f"not be downloaded from {url}: {exc}; {where}") from exc
    got = _sha256(Path(tmp.name))
    if got != sha:
        os.unlink(tmp.name)
        raise DataNotFoundError(f"download of {url} has SHA-256 {got}, expected {sha}; the "
                                f"source changed or the transfer failed; {where}")
    os.replace(tmp.name, path)
    return path


def _split_file(name: str, split: Split) -> str:
    if split not in ("all", "train", "test"):
        raise ValueError(f"split must be 'all', 'train' or 'test', got {split!r}")
    return f"carla/{name}.csv" if split == "all" else f"carla/{name}_{split}.csv"


def _carla(name: str, file: str, label: str, *, download: bool) -> Dataset:
    frame = pd.read_csv(fetch(file, download=download))
    if label not in frame.columns:
        raise DataNotFoundError(f"{file} has no label column {label!r}; is it the CARLA file?")
    y = frame.pop(label).astype(int)
    return Dataset(name, frame, y, source=f"CARLA cf-data ({REMOTE_FILES[file][0]})",
                   license="MIT (CARLA cf-data); underlying data under its original terms")


def load_adult(split: Split = "all", *, download: bool = True) -> Dataset:
    """CARLA's Adult income (48,832 rows; label ``income``, 1 = >50K)."""
    return _carla("adult", _split_file("adult", split), "income", download=download)


def load_compas(split: Split = "all", *, download: bool = True) -> Dataset:
    """CARLA's COMPAS (6,172 rows; label ``score``, 1 = not high risk)."""
    return _carla("compas", _split_file("compas", split), "score", download=download)


def load_heloc(split: Split = "all", *, download: bool = True) -> Dataset:
    """CARLA's HELOC (9,871 rows; label ``RiskPerformance``, 1 = good)."""
    return _carla("heloc", _split_file("heloc", split), "RiskPerformance", download=download)


def load_gmc(*, download: bool = True) -> Dataset:
    """CARLA's Give Me Some Credit test split (28,882 rows; label ``SeriousDlqin2yrs``,
    1 = no serious delinquency). Only this split is published; split it yourself."""
    return _carla("give_me_some_credit", "carla/give_me_some_credit_test.csv",
                  "SeriousDlqin2yrs", download=download)


GERMAN_COLUMNS = [
    "status", "duration", "credit_history", "purpose", "credit_amount", "savings",
    "present_employment", "installment_rate", "status_sex", "other_debtors",
    "residence_since", "property", "age", "installment_plans", "housing",
    "existing_credits", "job", "people_liable", "telephone", "foreign_worker",
]


def load_german() -> Dataset:
    """UCI Statlog German credit (1,000 applicants, 20 attributes), bundled.

    Coded attributes are replaced by their descriptions (``telephone`` and
    ``foreign_worker`` become booleans); ``y`` is 1 for good credit risk, 0 for bad.
    """
    folder = resources.files("cfopt") / "data"
    with (folder / "german_values_maps.json").open(encoding="utf-8") as fh:
        maps: dict[str, dict[str, Any]] = json.load(fh)
    with (folder / "german.data").open(encoding="utf-8") as fh:
        frame = pd.read_csv(fh, sep=" ", header=None, names=GERMAN_COLUMNS + ["credit"])
    for column, mapping in maps.items():
        if column in GERMAN_COLUMNS:
            labels = {k: v.strip() if isinstance(v, str) else v for k, v in mapping.items()}
            frame[column] = frame[column].map(labels)
            if frame[column].isna().any():
                raise DataNotFoundError(f"german.data has codes in {column!r} missing from "
                                        f"german_values_maps.json")
            if all(isinstance(v, bool) for v in labels.values()):
                frame[column] = frame[column].astype(bool)
    y = (frame.pop("credit") == 1).astype(int).rename("good_credit")
    return Dataset("german", frame, y,
                   source="UCI Statlog (German Credit Data), DOI 10.24432/C5NC77",
                   license="CC BY 4.0")


# --------------------------------------------------------------------------------------
# Virgolin & Fracaros (2023): five data sets annotated with perturbations
# --------------------------------------------------------------------------------------

#: the data sets of the paper, by the names of ``annotations.json``
VIRGOLIN_DATASETS = ("south_german_credit", "adult", "boston", "garments", "compas")


@dataclass
class AnnotatedDataset(Dataset):
    """A :class:`Dataset` with its feature space annotated by Virgolin & Fracaros.

    Attributes:
        space: the feature space (bounds = the annotated intervals, min-max scaling on
            them, categorical codes replaced by their labels), every feature carrying
            its :class:`~cfopt.Perturbation` (``None``: never perturbed).
        target_class: the class a counterfactual seeks (the paper's ``best_class``).
        plausibility: feature → ``"="``, ``">="``, ``"<="`` or ``None`` (the paper's
            plausibility constraints; applied by :meth:`space_with_plausibility`).
        paper_name: the data set's name in the paper (Cre, Inc, Hou, Pro, Rec).
        notes: what the annotation file records about the original code (including
            annotations the original silently dropped: ``dropped``).
        dropped: feature → the perturbation the original code meant but dropped by a
            typo (the ``space`` holds what the original actually used).
    """

    space: Any = None
    target_class: Any = None
    plausibility: dict[str, str | None] | None = None
    paper_name: str = ""
    notes: tuple[str, ...] = ()
    dropped: dict[str, Any] | None = None

    def space_with_plausibility(self) -> Any:
        """A copy of :attr:`space` with the plausibility constraints: ``=`` immutable,
        ``>=`` increase-only, ``<=`` decrease-only."""
        space = copy.deepcopy(self.space)
        for name, rule in (self.plausibility or {}).items():
            if rule == "=":
                space.immutable(name)
            elif rule == ">=":
                space.increase_only(name)
            elif rule == "<=":
                space.decrease_only(name)
        return space


def virgolin_annotations(*, download: bool = True) -> dict[str, Any]:
    """The parsed ``virgolin/annotations.json`` of the data home."""
    with open(fetch("virgolin/annotations.json", download=download), encoding="utf-8") as fh:
        data = json.load(fh)
    if "datasets" not in data:
        raise DataNotFoundError("virgolin/annotations.json has no 'datasets' entry; is it the "
                                "annotation file?")
    return data


def _read_virgolin(name: str, file: str, download: bool) -> tuple[pd.DataFrame, pd.Series]:
    """Raw features (CSV values, before integer coding) and labels, as the annotation
    file's ``loading`` text describes."""
    path = fetch(f"virgolin/{file}", download=download)
    if name == "boston":
        frame = pd.read_csv(path, header=None)
        y = (frame.pop(frame.columns[-1]) > 26.0).astype(int)
        return frame, y
    if name == "compas":
        raw = pd.read_csv(path)
        used = ["age", "sex", "race", "priors_count", "days_b_screening_arrest", "c_jail_in",
                "c_jail_out", "c_charge_degree", "is_recid", "is_violent_recid",
                "two_year_recid", "decile_score", "score_text"]
        frame = raw[used].dropna().copy()
        frame["days_b_screening_arrest"] = frame["days_b_screening_arrest"].abs()
        stay = pd.to_datetime(frame["c_jail_out"]) - pd.to_datetime(frame["c_jail_in"])
        frame["length_of_stay"] = stay.dt.days.abs()
        y = (frame["decile_score"] >= 7).astype(int)
        frame = frame.drop(columns=["c_jail_in", "c_jail_out", "decile_score", "score_text"])
        return frame.iloc[:2000].reset_index(drop=True), y.iloc[:2000].reset_index(drop=True)
    if name == "adult":
        frame = pd.read_csv(path, skipinitialspace=True, na_values="?")
        frame = frame.drop(columns=["fnlwgt", "education"]).dropna().reset_index(drop=True)
        return frame, frame.pop("income").astype(int)
    if name == "south_german_credit":
        frame = pd.read_csv(path)
        return frame, frame.pop("credit_risk").astype(int)
    if name == "garments":
        frame = pd.read_csv(path).drop(columns=["date", "wip"])
        features = [c for c in frame.columns if c != "actual_productivity"]
        frame = frame.drop_duplicates(subset=features).reset_index(drop=True)
        p = frame.pop("actual_productivity")
        return frame, ((p > 0.70).astype(int) + (p > 0.81).astype(int))
    raise ValueError(f"no reader for the annotated data set {name!r}")


def _label(coding: dict[str, Any] | None, code: Any) -> Any:
    return code if coding is None else coding[str(code)]


def load_virgolin(name: str, *, download: bool = True) -> AnnotatedDataset:
    """One of the five data sets of Virgolin & Fracaros (2023), with its annotations.

    ``name`` is one of :data:`VIRGOLIN_DATASETS` (Cre = ``south_german_credit``, Inc =
    ``adult``, Hou = ``boston``, Pro = ``garments``, Rec = ``compas``). Rows, labels
    and columns follow the ``loading`` description of ``virgolin/annotations.json`` in
    the data home;
    categorical features hold their labels (the annotation's ``coding``), numeric
    features are continuous within the annotated interval. The perturbation of every
    feature is the one the original code *used*; :attr:`AnnotatedDataset.dropped`
    lists the two it meant but silently dropped.
    """
    if name not in VIRGOLIN_DATASETS:
        raise ValueError(f"unknown annotated data set {name!r}; known: {list(VIRGOLIN_DATASETS)}")
    annotations = virgolin_annotations(download=download)
    spec = annotations["datasets"].get(name)
    if spec is None:
        raise DataNotFoundError(f"virgolin/annotations.json has no entry for {name!r}")
    frame, y = _read_virgolin(name, spec["csv"], download)
    features = spec["features"]
    if len(features) != frame.shape[1]:
        raise DataNotFoundError(f"virgolin/{spec['csv']} gives {frame.shape[1]} features, the "
                                f"annotations {len(features)}; is it the original file?")
    frame.columns = [f["name"] for f in features]
    if len(frame) != spec["n_rows"]:
        raise DataNotFoundError(f"virgolin/{spec['csv']} gives {len(frame)} rows after loading, "
                                f"the annotations say {spec['n_rows']}; is it the original "
                                f"file?")
    kinds, categories = {}, {}
    for f in features:
        if f["type"] == "categorical":
            levels = tuple(_label(f.get("coding"), c) for c in f["interval"])
            kinds[f["name"]], categories[f["name"]] = "categorical", levels
        else:
            kinds[f["name"]] = "continuous"
            frame[f["name"]] = frame[f["name"]].astype(float)
    from .space.feature import Perturbation
    from .space.space import FeatureSpace

    space = FeatureSpace.from_frame(frame, kinds=kinds, categories=categories)
    dropped = {}
    for f in features:
        p = f.get("perturbation")
        perturbation = None
        if p is not None and "categories" in p:
            perturbation = Perturbation.to_categories(
                *(_label(f.get("coding"), c) for c in p["categories"]))
        elif p is not None:
            perturbation = Perturbation(p["type"], p["increase"], p["decrease"])
        changes: dict[str, Any] = {"perturbation": perturbation}
        if f["type"] != "categorical":
            lo, hi = (float(v) for v in f["interval"])
            changes.update(lower=lo, upper=hi, shift=lo, scale=hi - lo)
        space.set(f["name"], **changes)
        if "perturbation_intended_but_dropped" in f:
            dropped[f["name"]] = f["perturbation_intended_but_dropped"]
    return AnnotatedDataset(
        name, frame, y.rename("label"), source=annotations.get("source", ""),
        license="as distributed with marcovirgolin/robust-counterfactuals (underlying data "
                "under its original terms)",
        space=space, target_class=spec["label"]["best_class"],
        plausibility={f["name"]: f["plausibility"] for f in features},
        paper_name=spec.get("paper_name", ""), notes=tuple(spec.get("notes", ())),
        dropped=dropped)
