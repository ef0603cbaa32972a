"""FeatureSpace: inference, the exact raw -> model-input map, editing, validation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from cfopt import Feature, FeatureSpace, Kind


@pytest.fixture
def frame():
    return pd.DataFrame({
        "age": [25, 40, 61, 33],
        "income": [1200.5, 3400.0, 800.25, 2000.0],
        "smoker": [0, 1, 0, 1],
        "city": ["paris", "rome", "oslo", "rome"],
        "sex": ["f", "m", "m", "f"],
        "grade": pd.Categorical(["low", "high", "mid", "mid"], categories=["low", "mid", "high"],
                                ordered=True),
        "member": [True, False, True, True],
    })


def test_kinds_are_inferred(frame):
    space = FeatureSpace.from_frame(frame)
    kinds = {f.name: f.kind for f in space}
    assert kinds == {"age": Kind.INTEGER, "income": Kind.CONTINUOUS, "smoker": Kind.BINARY,
                     "city": Kind.CATEGORICAL, "sex": Kind.BINARY, "grade": Kind.ORDINAL,
                     "member": Kind.BINARY}
    assert space["city"].categories == ("oslo", "paris", "rome")
    assert space["sex"].categories == ("f", "m")
    assert space["grade"].categories == ("low", "mid", "high")
    assert (space["age"].lower, space["age"].upper) == (25, 61)
    assert space.input_names == ["age", "income", "smoker", "city=oslo", "city=paris",
                                 "city=rome", "sex", "grade", "member"]


def test_minmax_matches_sklearn(frame):
    space = FeatureSpace.from_frame(frame, scaling="minmax")
    Z = space.transform(frame)
    numeric = frame[["age", "income"]].to_numpy(float)
    np.testing.assert_allclose(Z[:, :2], MinMaxScaler().fit_transform(numeric), atol=1e-15)
    np.testing.assert_array_equal(Z[:, 3:6], [[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_allclose(Z[:, 7], [0, 1, 0.5, 0.5])


def test_standard_matches_sklearn(frame):
    space = FeatureSpace.from_frame(frame, scaling="standard")
    numeric = frame[["age", "income"]].to_numpy(float)
    np.testing.assert_allclose(space.transform(frame)[:, :2],
                               StandardScaler().fit_transform(numeric), atol=1e-12)


def test_inverse_transform_roundtrip(frame):
    space = FeatureSpace.from_frame(frame)
    back = space.inverse_transform(space.transform(frame))
    for col in frame.columns:
        assert list(back[col]) == list(frame[col]), col


def test_editing_and_chaining(frame):
    space = FeatureSpace.from_frame(frame)
    out = space.immutable("sex").increase_only("age").decrease_only("income")
    assert out is space
    assert space["sex"].immutable and space["age"].direction == "increase"
    space.set("age", upper=100)
    assert space["age"].upper == 100 and space["age"].scale == 36  # scaling is unchanged
    space.set("grade", lower="mid")
    assert space["grade"].lower == 1
    with pytest.raises(TypeError, match="unknown feature attribute.*'colour'"):
        space.set("age", colour="red")
    with pytest.raises(ValueError, match="categorical feature 'city' has no order"):
        space.set("city", direction="increase")
    with pytest.raises(ValueError, match="lower bound 70.0 is above upper bound 60.0"):
        space.set("age", lower=70, upper=60)
    with pytest.raises(ValueError, match=r"unknown feature\(s\) \['nope'\]"):
        space.set("nope", immutable=True)
    for declare in (space.immutable, space.increase_only, space.decrease_only):
        with pytest.raises(ValueError, match=r"unknown feature\(s\) \['nope'\]"):
            declare("smoker", "nope")  # nothing partial: "smoker" is left as it was
        assert not space["smoker"].immutable and space["smoker"].direction == "any"
    with pytest.raises(KeyError, match="unknown feature 'nope'"):
        space["nope"]  # a mapping's lookup


def test_json_roundtrip(frame, tmp_path):
    space = FeatureSpace.from_frame(frame).immutable("sex")
    path = tmp_path / "space.json"
    space.to_json(str(path))
    again = FeatureSpace.from_json(str(path))
    assert again.to_dict() == space.to_dict()
    np.testing.assert_array_equal(again.transform(frame), space.transform(frame))
    assert json.loads(space.to_json())["features"][3]["categories"] == ["oslo", "paris", "rome"]


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop(columns=["age"]), r"missing column\(s\) \['age'\]"),
    (lambda f: f.assign(label=1), r"unexpected column\(s\) \['label'\]"),
    (lambda f: f.assign(income=[1.0, np.nan, 2.0, 3.0]), r"column 'income': missing value \(NaN\) in row 1"),
    (lambda f: f.assign(income=[1.0, np.inf, 2.0, 3.0]), r"column 'income': infinite value inf in row 1"),
    (lambda f: f.assign(city=["paris", "rome", "lima", "rome"]), r"column 'city': unseen category 'lima' in row 2"),
    (lambda f: f.assign(age=[25, 40, 99, 33]), r"column 'age': value 99 in row 2 is outside the declared bounds \[25, 61\]"),
    (lambda f: f.assign(age=[25, 40.5, 30, 33]), r"column 'age': integer feature has non-integer value 40.5 in row 1"),
    (lambda f: f.assign(age=["25", "forty", "30", "33"]), r"column 'age': value 'forty' in row 1 is not a number"),
    (lambda f: f.assign(smoker=[0, 2, 0, 1]), r"column 'smoker': value 2 in row 1 is outside"),
    (lambda f: f.assign(grade=["low", "top", "mid", "mid"]), r"column 'grade': unseen category 'top'"),
])
def test_validation_errors_name_column_and_value(frame, change, message):
    space = FeatureSpace.from_frame(frame)
    with pytest.raises(ValueError, match=message):
        space.transform(change(frame.copy()))


def test_feature_declaration_errors():
    with pytest.raises(ValueError, match="needs finite lower and upper bounds"):
        Feature("x", Kind.CONTINUOUS)
    with pytest.raises(ValueError, match="categorical feature 'c' needs its categories"):
        Feature("c", Kind.CATEGORICAL)
    with pytest.raises(ValueError, match="bounds must be integers"):
        Feature("n", Kind.INTEGER, lower=0.5, upper=3)
    with pytest.raises(ValueError, match="direction must be one of"):
        Feature("x", Kind.CONTINUOUS, lower=0, upper=1, direction="up")
    with pytest.raises(ValueError, match="scale must be positive"):
        Feature("x", Kind.CONTINUOUS, lower=0, upper=1, scale=0.0)
    with pytest.raises(ValueError, match="duplicate feature name 'x'"):
        FeatureSpace([Feature("x", Kind.BINARY), Feature("x", Kind.BINARY)])


def test_from_frame_errors(frame):
    with pytest.raises(ValueError, match="column 'income': NaN in row 2"):
        FeatureSpace.from_frame(frame.assign(income=[1.0, 2.0, np.nan, 3.0]))
    with pytest.raises(ValueError, match="scaling must be one of"):
        FeatureSpace.from_frame(frame, scaling="robust")
    with pytest.raises(ValueError, match="unknown column 'zzz'"):
        FeatureSpace.from_frame(frame, kinds={"zzz": "integer"})
    with pytest.raises(TypeError, match="takes a pandas DataFrame"):
        FeatureSpace.from_frame(frame.to_numpy())


def test_inverse_transform_keeps_a_bound_through_scaling_round_off():
    # min-max scaling of this range puts the upper bound 1 ulp above itself on decoding
    # (a hypothesis counterexample of the diverse-neighbours tests)
    lo, hi = -6.323372086969846, 0.5805110686514856
    space = FeatureSpace([Feature("f0", "continuous", lower=lo, upper=hi, shift=lo,
                                  scale=hi - lo)])
    assert 1.0 * (hi - lo) + lo > hi
    back = space.inverse_transform(space.transform(pd.DataFrame({"f0": [hi, lo]})))
    assert back["f0"].tolist() == [hi, lo]
    space.validate(back)
    far = space.inverse_transform([[1.5]])  # a genuinely outside input is not clipped
    assert far["f0"][0] > hi


def test_labelled_columns_are_checked_per_distinct_value_as_row_by_row():
    """A labelled column of one kind is checked per distinct value: the values, their
    bounds and the row an error names are those of the row-by-row check, which a
    column of mixed kinds (here with a missing value) still takes."""
    colour = Feature("colour", Kind.ORDINAL, lower=1, upper=2,
                     categories=("red", "green", "blue"))
    space = FeatureSpace([colour, Feature("x", Kind.CONTINUOUS, lower=0, upper=1)])
    rows = pd.DataFrame({"colour": ["green", "blue"] * 500, "x": 0.5},
                        index=[f"r{i}" for i in range(1000)])
    checked = space.validate(rows)
    assert list(checked["colour"]) == list(rows["colour"])
    assert all(type(v) is str for v in checked["colour"])
    late, early = rows.copy(), rows.copy()
    late.loc["r700", "colour"], late.loc["r400", "colour"] = "pink", "grey"
    with pytest.raises(ValueError, match="unseen category 'grey' in row 'r400'"):
        space.validate(late)
    early.loc["r3", "colour"] = "red"  # below the declared lower bound
    with pytest.raises(ValueError, match="value 'red' in row 'r3' is outside"):
        space.validate(early)
    mixed = late.astype({"colour": object})
    mixed.loc["r900", "colour"] = None
    with pytest.raises(ValueError, match="unseen category 'grey' in row 'r400'"):
        space.validate(mixed)
    mixed.loc["r100", "colour"] = None
    with pytest.raises(ValueError, match="missing value \\(NaN\\) in row 'r100'"):
        space.validate(mixed)
