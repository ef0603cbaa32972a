"""Raw rows checked against the declared features (:mod:`cfopt.space.validate`): what
comes back for good rows, and the exact message for each bad value, naming its column,
value and row (the row labels as given)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import cfopt
from cfopt.space.validate import as_frame, check_unique_columns

FRAME = pd.DataFrame({"x": [0.0, 10.0, 2.5], "n": [0, 5, 2], "b": [0, 1, 0],
                      "c": ["red", "green", "blue"], "o": ["lo", "hi", "lo"]})


@pytest.fixture(scope="module")
def space():
    s = cfopt.FeatureSpace.from_frame(FRAME)
    return s


def row(**values):
    base = {"x": 2.5, "n": 2, "b": 1, "c": "red", "o": "hi"}
    return pd.DataFrame([{**base, **values}], index=["r7"])


def test_as_frame():
    frame = pd.DataFrame({"a": [1]})
    assert as_frame(frame) is frame
    from_series = as_frame(pd.Series({"a": 1, "b": "u"}))
    assert list(from_series.columns) == ["a", "b"] and len(from_series) == 1
    assert from_series["a"].dtype.kind == "i"  # types inferred again, not object
    assert as_frame({"a": 2.0, "b": "v"}).to_dict("records") == [{"a": 2.0, "b": "v"}]
    with pytest.raises(TypeError, match="got list"):
        as_frame([1, 2])


def test_good_rows_come_back_typed(space):
    out = space.validate(pd.DataFrame({"x": [1, 2], "n": [3.0, 4.0], "b": [True, False],
                                       "c": ["blue", "red"], "o": ["lo", "hi"]}))
    assert out["x"].dtype == float and out["n"].dtype == np.int64
    assert out["b"].tolist() == [1, 0] and out["c"].tolist() == ["blue", "red"]
    mixed = space.validate(pd.DataFrame({"x": ["1.5", 2], "n": [np.int64(1), 2.0],
                                         "b": [1, 0], "c": np.array(["red", "blue"],
                                                                    dtype=object),
                                         "o": ["lo", "lo"]}))
    assert mixed["x"].tolist() == [1.5, 2.0] and mixed["n"].tolist() == [1, 2]


@pytest.mark.parametrize("values, message", [
    ({"x": np.nan}, "column 'x': missing value (NaN) in row 'r7'"),
    ({"x": None}, "column 'x': missing value (NaN) in row 'r7'"),
    ({"x": np.inf}, "column 'x': infinite value inf in row 'r7'"),
    ({"x": -np.inf}, "column 'x': infinite value -inf in row 'r7'"),
    ({"n": 2.5}, "column 'n': integer feature has non-integer value 2.5 in row 'r7'"),
    ({"x": "abc"}, "column 'x': value 'abc' in row 'r7' is not a number$"),
    ({"x": [1, 2]}, "column 'x': value [1, 2] in row 'r7' is not a number$"),
    ({"x": True}, "column 'x': value True in row 'r7' is not a number (a boolean, but the "
                  "feature is continuous)"),
    ({"x": 1 + 2j}, "column 'x': value (1+2j) in row 'r7' is not a number (complex)"),
    ({"x": 11.0}, "column 'x': value 11.0 in row 'r7' is outside the declared bounds "
                  "[0.0, 10.0]; widen them with space.set('x', lower=..., upper=...)"),
    ({"x": -0.5}, "column 'x': value -0.5 in row 'r7' is outside the declared bounds"),
    ({"n": 6.0}, "column 'n': value 6 in row 'r7' is outside the declared bounds [0, 5]"),
    ({"c": "pink"}, "column 'c': unseen category 'pink' in row 'r7'; known categories: "
                    "['blue', 'green', 'red']"),
    ({"c": np.nan}, "column 'c': missing value (NaN) in row 'r7'"),
    ({"o": "mid"}, "column 'o': unseen category 'mid' in row 'r7'"),
    ({"b": "yes"}, "column 'b': value 'yes' in row 'r7' is not a number$"),
])
def test_bad_values_are_named(space, values, message):
    anchored = message.endswith("$")
    pattern = "^" + re.escape(message.removesuffix("$")) + ("$" if anchored else "")
    with pytest.raises(ValueError, match=pattern):
        space.validate(row(**values))


def test_the_first_bad_row_is_named(space):
    frame = pd.concat([row(), row(c="pink"), row(c="teal")])
    frame.index = [3, 4, 5]
    with pytest.raises(ValueError, match="unseen category 'pink' in row 4;"):
        space.validate(frame)
    frame = pd.concat([row(), row(), row(c=7)])  # not of one kind: checked row by row
    frame.index = ["a", "b", "c"]
    with pytest.raises(ValueError, match="unseen category 7 in row 'c';"):
        space.validate(frame)
    frame = pd.concat([row(x=1.0), row(x=np.inf), row(x=-np.inf)])
    frame.index = [0, 1, 2]
    with pytest.raises(ValueError, match="infinite value inf in row 1$"):
        space.validate(frame)
    frame = pd.concat([row(n=1), row(n=1.5), row(n=9)])
    frame.index = [0, 1, 2]
    with pytest.raises(ValueError, match="value 1.5 in row 1$"):
        space.validate(frame)
    frame = pd.concat([row(x=5.0), row(x=-1.0), row(x=20.0)])
    frame.index = [0, 1, 2]
    with pytest.raises(ValueError, match="value -1.0 in row 1 "):
        space.validate(frame)


def test_a_column_of_mixed_types_is_checked_row_by_row():
    """Labels of mixed types (here the categories 1, 'a', 'b') come back as given."""
    s = cfopt.FeatureSpace.from_frame(pd.DataFrame({"m": ["a", 1, "b"]}))
    out = s.validate(pd.DataFrame({"m": ["b", 1, "a"]}))
    assert out["m"].tolist() == ["b", 1, "a"]
    with pytest.raises(ValueError, match="^column 'm': unseen category 2 in row 1;"):
        s.validate(pd.DataFrame({"m": ["b", 2]}))


def test_bounds_checked_only_when_asked(space):
    out = space.validate(row(x=11.0, n=9), check_bounds=False)
    assert out["x"].iloc[0] == 11.0 and out["n"].iloc[0] == 9


def test_a_boolean_binary_feature_is_a_number():
    s = cfopt.FeatureSpace.from_frame(pd.DataFrame({"flag": [True, False]}))
    assert s.validate(pd.DataFrame({"flag": [True]}))["flag"].tolist() == [1]


def test_duplicate_columns():
    frame = pd.DataFrame([[1, 2, 3, 4]], columns=["a", "b", "a", "a"])
    with pytest.raises(ValueError, match=re.escape("duplicate column(s) ['a']; each")):
        check_unique_columns(frame)
    check_unique_columns(pd.DataFrame({"a": [1], "b": [2]}))


def test_a_missing_label_among_labels_is_named(space):
    """A NaN among strings makes the column not of one kind: it is named, not read as a
    label."""
    frame = pd.concat([row(), row(c=np.nan)])
    frame.index = ["a", "b"]
    with pytest.raises(ValueError, match="^column 'c': missing value \\(NaN\\) in row 'b'$"):
        space.validate(frame)


@pytest.mark.parametrize("levels, value", [(("lo", "mid", "hi"), "lo"),  # one kind
                                           ((0.5, 1.5, 2.5), 0.5)])  # floats: row by row
def test_an_ordinal_level_outside_its_bounds(levels, value):
    """An ordinal's bounds are level positions: a level below them is outside."""
    s = cfopt.FeatureSpace([cfopt.Feature("lv", "ordinal", lower=1, upper=2,
                                          categories=levels)])
    good = s.validate(pd.DataFrame({"lv": [levels[2], levels[1]]}))
    assert good["lv"].tolist() == [levels[2], levels[1]]
    bad = pd.DataFrame({"lv": [levels[1], value]})
    with pytest.raises(ValueError, match=f"^column 'lv': value {value!r} in row 1 is outside "
                                         f"the declared bounds \\[{levels[1]!r}, "
                                         f"{levels[2]!r}\\]"):
        s.validate(bad)
    assert s.validate(bad, check_bounds=False)["lv"].tolist() == [levels[1], value]
