"""Model inputs from raw features (:mod:`cfopt.space.encoding`) on a hand-built space,
by hand: each kind of input spec's value, bounds, grid, round-off allowance and moves,
and the vectorised :class:`CodeEncoder` against :func:`encode`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cfopt
from cfopt.space.encoding import (
    CodeEncoder,
    InputSpec,
    encode,
    input_moves,
    library_input,
    space_specs,
    spec_bounds,
    spec_grids,
    spec_rounding,
    unit_bounds,
    unit_box,
)
from cfopt.space.feature import Feature

EPS = float(np.finfo(np.float64).eps)
SPACE = cfopt.FeatureSpace([
    Feature("x", "continuous", -2.0, 8.0, shift=-2.0, scale=10.0),
    Feature("n", "integer", 1.0, 5.0, shift=1.0, scale=4.0, direction="decrease"),
    Feature("c", "categorical", categories=("a", "b", "z")),
    Feature("o", "ordinal", categories=("lo", "mid", "hi"), direction="increase"),
    Feature("m", "continuous", 0.0, 1.0, immutable=True),
])
AFFINE_X = InputSpec("affine", "x", -0.5, 3.0)
LEVELS = InputSpec("levels", "c", 2.0, 1.0, codes=(("a", 0), ("b", 3), ("z", 6)))
SPECS = [AFFINE_X, InputSpec("affine", "n", 2.0, -1.0), InputSpec("indicator", "c", level="b"),
         LEVELS, InputSpec("affine", "o", 1.0, 0.0), InputSpec("constant", b=4.0),
         InputSpec("affine", "m", 1.0, 0.0)]
ROWS = pd.DataFrame({"x": [-2.0, 8.0, 0.5], "n": [1, 5, 2], "c": ["a", "b", "z"],
                     "o": ["lo", "hi", "mid"], "m": [0.0, 1.0, 0.25]})


def test_unit_boxes():
    lo, width = unit_box([(1, 3), (2.0, 2.0), (-1.0, 0.0)])
    np.testing.assert_array_equal(lo, [1.0, 2.0, -1.0])
    np.testing.assert_array_equal(width, [2.0, 1.0, 1.0])
    assert lo.dtype == width.dtype == np.float64
    assert unit_box([(1, 3), (0, 5)])[1].dtype == np.float64  # integer bounds too
    assert unit_bounds([(1, 3), (2.0, 2.0), (-1.0, 0.0)]) == [(0.0, 1.0), (0.0, 0.0),
                                                              (0.0, 1.0)]


def test_the_space_transform_as_specs():
    assert space_specs(SPACE) == [
        InputSpec("affine", "x", 0.1, 0.2), InputSpec("affine", "n", 0.25, -0.25),
        *[InputSpec("indicator", "c", level=lv) for lv in ("a", "b", "z")],
        InputSpec("affine", "o", 1.0, 0.0), InputSpec("affine", "m", 1.0, 0.0)]
    np.testing.assert_allclose(encode(SPACE, space_specs(SPACE), ROWS),
                               SPACE.transform(ROWS), rtol=0, atol=1e-15)


def test_encode_by_hand():
    assert LEVELS.values() == {"a": 1.0, "b": 7.0, "z": 13.0}
    np.testing.assert_allclose(encode(SPACE, SPECS, ROWS), [
        [4.0, 1.0, 0.0, 1.0, 0.0, 4.0, 0.0],
        [-1.0, 9.0, 1.0, 7.0, 2.0, 4.0, 1.0],
        [2.75, 3.0, 0.0, 13.0, 1.0, 4.0, 0.25]], rtol=0, atol=0)


def test_encode_reads_numpy_scalars_and_a_level_the_space_lacks():
    """Categorical, ordinal and level inputs by Python equality (numpy strings as str);
    an indicator of a level the space does not have (a pipeline's encoder may know more)
    is 0 on every row, and an unknown ordinal label is named."""
    rows = ROWS.assign(c=np.array(["a", "b", "z"], dtype=object),
                       o=[np.str_("lo"), "hi", np.str_("mid")])
    np.testing.assert_array_equal(encode(SPACE, SPECS, rows), encode(SPACE, SPECS, ROWS))
    np.testing.assert_array_equal(SPACE.encode(rows), SPACE.encode(ROWS))
    extra = [InputSpec("indicator", "c", level="q"), InputSpec("indicator", "c", level="z")]
    np.testing.assert_array_equal(encode(SPACE, extra, ROWS), [[0, 0], [0, 0], [0, 1]])
    with pytest.raises(ValueError, match="unseen category 'top'"):
        encode(SPACE, SPECS, ROWS.assign(o=["lo", "top", "mid"]))


def test_moves_bounds_grids_and_round_off():
    # x any way (a < 0 turns them), n decrease-only (a > 0), o increase-only, m immutable
    assert input_moves(SPACE, SPECS) == [(True, True), (False, True), (False, False),
                                         (False, False), (True, False), (False, False),
                                         (False, False)]
    assert input_moves(SPACE, [InputSpec("affine", "n", -1.0, 0.0),
                               InputSpec("affine", "o", -1.0, 0.0)]) == [(True, False),
                                                                          (False, True)]
    assert spec_bounds(SPACE, SPECS) == [(-1.0, 4.0), (1.0, 9.0), (0.0, 1.0), (1.0, 13.0),
                                         (0.0, 2.0), (4.0, 4.0), (0.0, 1.0)]
    assert spec_grids(SPACE, SPECS) == [None, (-1.0, 2.0), (0.0, 1.0), (1.0, 6.0),
                                        (0.0, 1.0), (4.0, 1.0), None]
    assert spec_rounding(SPACE, SPECS) == [16 * EPS * 7.0, 16 * EPS * 11.0, 0.0,
                                           16 * EPS * 13.0, 16 * EPS * 2.0, 0.0, 16 * EPS]


@pytest.mark.parametrize("spec, grid, rounding", [
    (InputSpec("levels", "c", 1.0, 0.0, codes=(("a", 0), ("b", 1))), (0.0, 1.0), 0.0),
    (InputSpec("levels", "c", 1.0, 0.5, codes=(("a", 0), ("b", 4))), (0.5, 4.0), 4.5),
    (InputSpec("levels", "c", -3.0, 0.0, codes=(("a", 2), ("b", -4))), (0.0, 6.0), 12.0),
    (InputSpec("levels", "c", 0.0, 2.0, codes=(("a", 1), ("b", 3))), (2.0, 1.0), 2.0),
    (InputSpec("levels", "c", 2.0, 0.0, codes=(("a", 0), ("b", 0))), (0.0, 1.0), 0.0),
    (InputSpec("levels", "c", 0.25, 0.0, codes=(("a", 0), ("b", 2))), (0.0, 0.5), 0.5),
    (InputSpec("affine", "n", 0.0, 3.0), None, 3.0),
    (InputSpec("affine", "n", -0.5, 1.0), (1.0, 0.5), 3.5),
])
def test_grids_and_round_off_of_levels_and_integers(spec, grid, rounding):
    assert spec_grids(SPACE, [spec]) == [grid]
    assert spec_rounding(SPACE, [spec]) == [16 * EPS * rounding]


class Recorder:
    """A model whose inputs are ``specs`` of the rows, recording the rows it is given."""

    def __init__(self, specs: list[InputSpec]) -> None:
        self.specs, self.rows = specs, []

    def model_inputs(self, space, rows: pd.DataFrame) -> np.ndarray:
        self.rows.append(rows)
        return encode(space, self.specs, rows) + 1e-3  # its arithmetic: a little off


def test_the_librarys_own_input():
    """The real model's value at the code whose MILP input is the value: computed on a
    row at every other feature's lower end (a categorical's first category)."""
    model = Recorder(SPECS)
    assert library_input(model, SPACE, SPECS, 2, 1.0) == 1.0  # an indicator: as given
    assert library_input(model, SPACE, SPECS, 5, 4.0) == 4.0 and model.rows == []
    assert library_input(model, SPACE, SPECS, 0, 2.75) == pytest.approx(2.751)  # x = 0.5
    assert model.rows[-1].to_dict("records") == [{"x": 0.5, "n": 1, "c": "a", "o": "lo",
                                                  "m": 0.0}]
    assert list(model.rows[-1].columns) == SPACE.names
    assert library_input(model, SPACE, SPECS, 1, 5.0 + 1e-9) == pytest.approx(5.001)
    assert model.rows[-1]["n"].tolist() == [3]  # the integer code, rounded
    assert library_input(model, SPACE, SPECS, 4, 2.0) == pytest.approx(2.001)
    assert model.rows[-1]["o"].tolist() == ["hi"]


def test_the_code_encoder_by_hand():
    enc = CodeEncoder(SPACE, SPECS)
    assert enc.n_inputs == 7 and enc.index == {"x": 0, "n": 1, "c": 2, "o": 3, "m": 4}
    assert enc.positions("c").tolist() == [2, 3] and enc.positions("nothing").tolist() == []
    assert enc.positions("c").dtype.kind == "i"
    codes = enc.codes(ROWS.iloc[[2]])
    assert codes.tolist() == [0.5, 2.0, 2.0, 1.0, 0.25] and codes.dtype == np.float64
    pd.testing.assert_frame_equal(enc.row(codes), ROWS.iloc[[2]].reset_index(drop=True))
    z = encode(SPACE, SPECS, ROWS.iloc[[0]])[0]
    Z = enc.inputs(z, "c", [1, 2])
    np.testing.assert_array_equal(Z, encode(SPACE, SPECS, ROWS.iloc[[0, 0]].assign(
        c=["b", "z"])))
    Z = enc.inputs(z, "x", np.array([0, 8]))
    np.testing.assert_array_equal(Z, encode(SPACE, SPECS, ROWS.iloc[[0, 0]].assign(
        x=[0.0, 8.0])))
    np.testing.assert_array_equal(enc.slope("x"), [-0.5, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(enc.slope("c"), np.zeros(7))
    np.testing.assert_array_equal(enc.slope("m"), [0, 0, 0, 0, 0, 0, 1.0])


def test_a_feature_without_inputs():
    """A feature the model does not read (no spec): no positions, no slope, no change."""
    enc = CodeEncoder(SPACE, SPECS[:-1])
    positions = enc.positions("m")
    assert positions.tolist() == [] and positions.dtype.kind == "i"
    z = encode(SPACE, SPECS[:-1], ROWS.iloc[[0]])[0]
    assert enc.inputs(z, "m", [0.5, 1.0]).tolist() == [z.tolist()] * 2
    np.testing.assert_array_equal(enc.slope("m"), np.zeros(6))
    only_labels = cfopt.FeatureSpace([SPACE["c"]])
    codes = CodeEncoder(only_labels, space_specs(only_labels)).codes(ROWS.iloc[[1]][["c"]])
    assert codes.tolist() == [1.0] and codes.dtype == np.float64
