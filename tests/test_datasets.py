"""Data loaders: bundled German credit, CARLA files from the data home, downloads."""

from __future__ import annotations

import io
import urllib.error
from pathlib import Path

import pytest

import cfopt
from cfopt import datasets

from .conftest import IN_CI, carla_or_skip


def test_german_is_bundled_and_decoded():
    data = datasets.load_german()
    assert data.X.shape == (1000, 20) and data.y.mean() == pytest.approx(0.7)
    assert set(data.X["purpose"].unique()) >= {"car (new)", "radio/television", "business"}
    assert data.X["foreign_worker"].dtype == bool
    assert data.license == "CC BY 4.0"
    assert list(data.frame.columns)[-1] == "good_credit"


@pytest.mark.parametrize("loader, rows, label", [
    (datasets.load_adult, 48832, "income"),
    (datasets.load_compas, 6172, "score"),
    (datasets.load_heloc, 9871, "RiskPerformance"),
    (datasets.load_gmc, 28882, "SeriousDlqin2yrs"),
])
def test_carla_loaders(loader, rows, label):
    data = carla_or_skip(loader)
    assert len(data.X) == rows and data.y.name == label
    assert set(data.y.unique()) == {0, 1}
    space = cfopt.FeatureSpace.from_frame(data.X)
    assert space.transform(data.X.head(50)).shape == (50, space.n_inputs)


def test_carla_splits():
    train = carla_or_skip(datasets.load_adult, split="train")
    test = carla_or_skip(datasets.load_adult, split="test")
    assert (len(train.X), len(test.X)) == (36624, 12208)
    with pytest.raises(ValueError, match="split must be"):
        datasets.load_adult(split="validation")


def test_ci_has_the_data():
    if not IN_CI:
        pytest.skip("only enforced in CI")
    home = datasets.data_home()
    for rel in datasets.REMOTE_FILES:
        assert (home / rel).exists(), f"{rel} missing from CFOPT_DATA_HOME={home}"


def test_offline_download_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CFOPT_DATA_HOME", str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(datasets.urllib.request, "urlopen", offline)
    with pytest.raises(cfopt.DataNotFoundError, match=r"carla/compas.csv is not in the data home.*"
                       r"could not be downloaded from https://.*compas.csv.*network is unreachable"
                       r".*set CFOPT_DATA_HOME"):
        datasets.load_compas()
    with pytest.raises(cfopt.DataNotFoundError, match="is not in the data home"):
        datasets.load_compas(download=False)


def _serve(content: bytes):
    def urlopen(url, timeout=None):
        return io.BytesIO(content)
    return urlopen


def test_download_checks_the_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("CFOPT_DATA_HOME", str(tmp_path))
    monkeypatch.setattr(datasets.urllib.request, "urlopen", _serve(b"age,score\n1,0\n"))
    with pytest.raises(cfopt.DataNotFoundError, match="has SHA-256 .*expected e9943"):
        datasets.load_compas()
    assert not (tmp_path / "carla" / "compas.csv").exists()
    assert list((tmp_path / "carla").iterdir()) == []  # no partial file left


def test_download_places_the_verified_file(tmp_path, monkeypatch):
    source = datasets.data_home() / "carla" / "compas.csv"
    if not source.exists():
        if IN_CI:
            raise AssertionError(f"{source} missing in CI")
        pytest.skip("CARLA data not in CFOPT_DATA_HOME")
    monkeypatch.setenv("CFOPT_DATA_HOME", str(tmp_path))
    monkeypatch.setattr(datasets.urllib.request, "urlopen", _serve(source.read_bytes()))
    data = datasets.load_compas()
    assert len(data.X) == 6172
    assert (tmp_path / "carla" / "compas.csv").read_bytes() == source.read_bytes()


def test_data_home_default(monkeypatch, tmp_path):
    monkeypatch.delenv("CFOPT_DATA_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert datasets.data_home() == Path(tmp_path) / "cfopt"
    with pytest.raises(ValueError, match="unknown data file"):
        datasets.fetch("carla/nope.csv")
