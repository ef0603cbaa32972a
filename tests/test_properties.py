"""Property-based tests (hypothesis) over random feature spaces and random small models
of every supported family; the checks are in ``tests/property_checks.py``.

The hypothesis profile ``hardening-ci`` (default) runs a few examples per family;
``CFOPT_HYPOTHESIS_PROFILE=hardening-report`` runs the report's number
(``benchmarks/robustness_suite.py``). Both are derandomized: a run is reproducible.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings

from .property_checks import FAMILIES, check, examples

PROFILE = settings.get_profile(os.environ.get("CFOPT_HYPOTHESIS_PROFILE", "hardening-ci"))


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny networks: one thread (two oversubscribe a loaded 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _property(family: str):
    @settings(PROFILE)
    @given(ex=examples(family))
    def run(ex) -> None:
        result = check(ex)
        assert not result.problems, f"{ex}: {result.problems}"
    return run


@pytest.mark.parametrize("family", FAMILIES)
def test_counterfactuals_verified_admissible_and_consistent(family):
    _property(family)()
