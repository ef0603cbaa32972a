"""The feature space (:mod:`cfopt.space.space`) and its inference from a frame
(:mod:`cfopt.space.infer`): kinds, bounds, scalings, spreads, editing with errors naming
the culprit, the model-input layout, decoding and serialization."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cfopt import Feature, FeatureSpace, Kind, Perturbation
from cfopt.space.infer import infer_feature, infer_kind, sorted_labels


def test_sorted_labels():
    assert sorted_labels([np.int64(3), 1, 2]) == (1, 2, 3)
    assert sorted_labels(["b", 1, "a"]) == (1, "a", "b")  # mixed: by text
    assert sorted_labels([10, 9]) == (9, 10)  # numbers: by value, not by text


@pytest.mark.parametrize("values, kind", [
    (pd.Series([0, 1, 1]), Kind.BINARY), (pd.Series([0.0, 0.0]), Kind.BINARY),
    (pd.Series([1, 1]), Kind.BINARY), (pd.Series([True, False]), Kind.BINARY),
    (pd.Series([0, 2]), Kind.INTEGER), (pd.Series([1.0, 3.0]), Kind.INTEGER),
    (pd.Series([0.5, 1.0]), Kind.CONTINUOUS), (pd.Series(["a", "b"]), Kind.BINARY),
    (pd.Series(["a", "b", "c"]), Kind.CATEGORICAL), (pd.Series(["a", "a"]), Kind.CATEGORICAL),
    (pd.Series(pd.Categorical(["a", "b"], categories=["a", "b", "c"])), Kind.CATEGORICAL),
    (pd.Series(pd.Categorical(["a"], categories=["a", "b"])), Kind.BINARY),
    (pd.Series(pd.Categorical(["a"], categories=["a", "b"], ordered=True)), Kind.ORDINAL),
])
def test_kinds(values, kind):
    assert infer_kind(values) is kind


def test_infinite_values_define_no_feature():
    with pytest.raises(ValueError, match="column 'x': infinite values cannot define a feature"):
        infer_kind(pd.Series([1.0, np.inf], name="x"))


def test_inferred_numeric_features():
    col = pd.Series([2.0, 4.0, 10.0, 4.0])
    f = infer_feature("x", col, Kind.CONTINUOUS, None, "minmax")
    assert (f.lower, f.upper, f.shift, f.scale, f.spread) == (2.0, 10.0, 2.0, 8.0, 8.0)
    assert f.mad == 1.0  # median 4, deviations 2 0 6 0
    s = infer_feature("x", col, Kind.CONTINUOUS, None, "standard")
    assert s.shift == pytest.approx(5.0) and s.scale == pytest.approx(np.std(col))
    n = infer_feature("x", col, Kind.CONTINUOUS, None, "none")
    assert (n.shift, n.scale) == (0.0, 1.0)
    flat = infer_feature("x", pd.Series([3.0, 3.0]), Kind.CONTINUOUS, None, "standard")
    assert flat.scale == 1.0 and flat.shift == 3.0 and flat.spread == 0.0
    flat = infer_feature("x", pd.Series([3.0, 3.0]), Kind.CONTINUOUS, None, "minmax")
    assert flat.scale == 1.0
    narrow = infer_feature("x", pd.Series([0.25, 0.75]), Kind.CONTINUOUS, None, "minmax")
    assert (narrow.shift, narrow.scale) == (0.25, 0.5)
    b = infer_feature("b", pd.Series([1, 1]), Kind.BINARY, None, "minmax")
    assert (b.lower, b.upper, b.scale, b.categories) == (0.0, 1.0, 1.0, ())
    t = infer_feature("t", pd.Series([True, False, True]), Kind.BINARY, None, "minmax")
    assert t.categories == (False, True) and t.to_code(True) == 1.0
    with pytest.raises(ValueError, match="column 'i': integer feature has non-integer values"):
        infer_feature("i", pd.Series([1.0, 1.5]), Kind.INTEGER, None, "minmax")
    with pytest.raises(ValueError, match="column 'b': binary feature has non-integer values"):
        infer_feature("b", pd.Series([0.0, 0.5]), Kind.BINARY, None, "minmax")
    with pytest.raises(ValueError, match=r"column 'x': value 'two' is not a number \(declare "
                                         r"the column categorical\)"):
        infer_feature("x", pd.Series(["1", "two", "3"]), Kind.INTEGER, None, "minmax")
    assert infer_feature("x", pd.Series(["1", "3"]), Kind.INTEGER, None, "minmax").upper == 3


def test_inferred_labelled_features():
    o = infer_feature("o", pd.Series(pd.Categorical(["b", "c"], categories=["c", "b", "a"],
                                                    ordered=True)), Kind.ORDINAL, None, "minmax")
    assert o.categories == ("c", "b", "a") and (o.lower, o.upper) == (0.0, 2.0)
    assert (o.shift, o.scale, o.spread) == (0.0, 2.0, 1.0)  # bounds: all the levels
    given = infer_feature("o", pd.Series(["lo", "hi"]), Kind.ORDINAL, ("lo", "mid", "hi"),
                          "minmax")
    assert given.categories == ("lo", "mid", "hi") and given.upper == 2.0
    c = infer_feature("c", pd.Series(["z", "x", "y"]), Kind.CATEGORICAL, None, "minmax")
    assert c.categories == ("x", "y", "z") and c.lower is None and c.shift == 0.0
    lb = infer_feature("s", pd.Series(["m", "f", "m"]), Kind.BINARY, None, "minmax")
    assert lb.categories == ("f", "m") and lb.mad == 0.0 and lb.spread == 1.0
    with pytest.raises(ValueError, match=r"column 'c': values \['w'\] are not among the "
                                         r"declared categories \['x', 'y'\]"):
        infer_feature("c", pd.Series(["x", "w"]), Kind.CATEGORICAL, ("x", "y"), "minmax")
    with pytest.raises(ValueError, match=r"column 's': a binary feature needs two labels, "
                                         r"found \['a', 'b', 'c'\]"):
        infer_feature("s", pd.Series(["a", "b", "c"]), Kind.BINARY, None, "minmax")


FRAME = pd.DataFrame({"a": [0.0, 2.5, 10.0], "k": [1, 3, 2], "c": ["p", "q", "r"],
                      "o": pd.Categorical(["lo", "hi", "mid"], categories=["lo", "mid", "hi"],
                                          ordered=True)})


def test_from_frame_options_and_errors():
    space = FeatureSpace.from_frame(FRAME, kinds={"k": "continuous"},
                                    categories={"c": ["r", "q", "p"]})
    assert space["k"].kind is Kind.CONTINUOUS and space["c"].categories == ("r", "q", "p")
    assert FeatureSpace.from_frame(FRAME, scaling="none")["a"].scale == 1.0
    with pytest.raises(ValueError, match=r"unknown column 'z'; columns are \['a', 'k', 'c', "
                                         r"'o'\]"):
        FeatureSpace.from_frame(FRAME, categories={"z": ["x"]})
    with pytest.raises(ValueError, match="^cannot infer a feature space from an empty "
                                         "DataFrame$"):
        FeatureSpace.from_frame(FRAME.iloc[:0])
    with pytest.raises(ValueError, match="column names must be strings, got 3"):
        FeatureSpace.from_frame(pd.DataFrame({3: [1.0, 2.0]}))
    with pytest.raises(ValueError, match="column 'a': NaN in row 'y'"):
        FeatureSpace.from_frame(pd.DataFrame({"a": [1.0, None]}, index=["x", "y"]))
    with pytest.raises(ValueError, match="feature 'k': unknown kind 'real'"):
        FeatureSpace.from_frame(FRAME, kinds={"k": "real"})
    with pytest.raises(TypeError, match="from_frame takes a pandas DataFrame, got list"):
        FeatureSpace.from_frame([[1, 2]])
    with pytest.raises(ValueError, match=r"scaling must be one of \('minmax', 'standard', "
                                         r"'none'\), got 'robust'"):
        FeatureSpace.from_frame(FRAME, scaling="robust")


def test_construction_errors_and_access():
    with pytest.raises(TypeError, match="FeatureSpace takes Feature objects, got dict"):
        FeatureSpace([{"name": "a"}])
    with pytest.raises(ValueError, match="^a FeatureSpace needs at least one feature$"):
        FeatureSpace([])
    space = FeatureSpace.from_frame(FRAME)
    assert len(space) == 4 and "c" in space and "z" not in space
    assert [f.name for f in space] == space.names == ["a", "k", "c", "o"]
    assert space.features == [space[n] for n in space.names]
    assert repr(space) == "FeatureSpace(4 features, 6 model inputs)"
    with pytest.raises(KeyError, match=r"unknown feature 'z'; features are \['a', 'k', 'c', "
                                       r"'o'\]"):
        space["z"]


def test_summary():
    space = FeatureSpace.from_frame(FRAME).set("a", perturbation=Perturbation.absolute(1))
    table = space.summary()
    assert list(table.index) == ["a", "k", "c", "o"]
    assert list(table.columns) == ["kind", "lower", "upper", "categories", "immutable",
                                   "direction", "shift", "scale", "perturbation"]
    assert table.loc["c", "categories"] == ["p", "q", "r"] and table.loc["a", "categories"] is None
    assert table.loc["o", "kind"] == "ordinal" and table.loc["a", "upper"] == 10.0
    assert table.loc["a", "perturbation"] == {"kind": "absolute", "increase": 1.0,
                                              "decrease": 0.0}
    assert table.loc["k", "perturbation"] is None and table.loc["k", "scale"] == 2.0


def test_editing():
    space = FeatureSpace.from_frame(FRAME)
    space.set("k", kind="continuous")
    assert space["k"].kind is Kind.CONTINUOUS
    space.set("k", kind=Kind.INTEGER)
    with pytest.raises(ValueError, match="feature 'c': only continuous <-> integer kind "
                                         "changes keep the encoding; rebuild the space to "
                                         "change categorical to integer"):
        space.set("c", kind="integer")
    with pytest.raises(ValueError, match="change integer to ordinal"):
        space.set("k", kind="ordinal")
    with pytest.raises(TypeError, match=r"unknown feature attribute\(s\) \['colour', 'size'\] "
                                        r"for 'a'; editable: \['lower'"):
        space.set("a", size=1, colour="red")
    space.set("o", lower="mid", upper=2)
    assert (space["o"].lower, space["o"].upper) == (1.0, 2.0)
    space.set("o", upper=1.0)
    assert space["o"].upper == 1.0


def test_vary_only_and_directions():
    space = FeatureSpace.from_frame(FRAME)
    assert space.vary_only("a", "c") is space
    assert [f.immutable for f in space] == [False, True, False, True]
    with pytest.raises(ValueError, match=r"features_to_vary names unknown feature\(s\) "
                                         r"\['z'\]; the space has"):
        space.vary_only("a", "z")
    with pytest.raises(ValueError, match="^features_to_vary is empty: name at least one "
                                         "feature that may change$"):
        space.vary_only()
    with pytest.raises(ValueError, match=r"features_to_vary names immutable feature\(s\) "
                                         r"\['k'\]; free them first"):
        space.vary_only("a", "k")
    space = FeatureSpace.from_frame(FRAME)
    assert space.increase_only("a").increase_only("a") is space
    assert space["a"].direction == "increase"
    with pytest.raises(ValueError, match="feature 'a' is already increase-only; declaring it "
                                         "decrease-only too leaves it no move"):
        space.decrease_only("a")
    assert space.decrease_only("k")["k"].direction == "decrease"
    with pytest.raises(ValueError, match="feature 'k' is already decrease-only; declaring it "
                                         "increase-only"):
        space.increase_only("k")
    assert space.immutable("o")["o"].immutable


def test_the_input_layout():
    space = FeatureSpace.from_frame(FRAME)
    assert space.input_names == ["a", "k", "c=p", "c=q", "c=r", "o"]
    assert space.n_inputs == 6
    assert space.input_slices() == {"a": slice(0, 1), "k": slice(1, 2), "c": slice(2, 5),
                                    "o": slice(5, 6)}
    space.set("a", lower=-5.0)
    assert space.input_bounds() == [(-0.5, 1.0), (0.0, 1.0), (0.0, 1.0), (0.0, 1.0),
                                    (0.0, 1.0), (0.0, 1.0)]
    assert space.input_grids() == [None, (-0.5, 0.5), (0.0, 1.0), (0.0, 1.0), (0.0, 1.0),
                                   (0.0, 0.5)]
    assert len(space.input_rounding()) == 6


def test_encode_and_decode():
    space = FeatureSpace.from_frame(FRAME)
    Z = space.transform(FRAME)
    assert np.allclose(Z, [[0, 0, 1, 0, 0, 0], [0.25, 1, 0, 1, 0, 1], [1, 0.5, 0, 0, 1, 0.5]])
    labelled_only = FeatureSpace([Feature("c", "categorical", categories=("p", "q")),
                                  Feature("b", "binary", categories=("no", "yes"))])
    assert np.allclose(labelled_only.encode(pd.DataFrame({"c": ["q"], "b": ["yes"]})),
                       [[0, 1, 1]])
    back = space.inverse_transform(Z)
    assert back.equals(pd.DataFrame({"a": [0.0, 2.5, 10.0], "k": [1, 3, 2],
                                     "c": ["p", "q", "r"], "o": ["lo", "hi", "mid"]}))
    one = space.inverse_transform([0.5, 0.5, 0.2, 0.7, 0.1, 0.5])
    assert one.iloc[0].tolist() == [5.0, 2, "q", "mid"]
    with pytest.raises(ValueError, match="expected 6 model inputs, got 5"):
        space.inverse_transform(np.zeros((1, 5)))
    lo_edge = space.inverse_transform([[-1e-13, 0, 1, 0, 0, 0]])
    assert lo_edge["a"][0] == 0.0
    assert space.inverse_transform([[-1e-6, 0, 1, 0, 0, 0]])["a"][0] < 0.0
    assert space.inverse_transform([[1 + 5e-13, 0, 1, 0, 0, 0]])["a"][0] == 10.0
    assert space.inverse_transform([[1 + 1e-6, 0, 1, 0, 0, 0]])["a"][0] > 10.0
    wide = FeatureSpace([Feature("f", "continuous", lower=1e6, upper=1e6 + 1, shift=1e6,
                                 scale=1.0)])
    assert wide.inverse_transform([[1.0 + 4e-7]])["f"][0] == 1e6 + 1  # 1e-12 of |upper|


def test_validate_or_keep():
    space = FeatureSpace.from_frame(FRAME)
    good = FRAME.iloc[[0]].copy()
    assert space.validate_or_keep(good).equals(space.validate(good))
    bad = good.assign(a=99.0)
    assert space.validate_or_keep(bad) is bad
    reordered = space.validate(FRAME[["o", "c", "k", "a"]])
    assert list(reordered.columns) == ["a", "k", "c", "o"]
    with pytest.raises(ValueError, match=r"missing column\(s\) \['k', 'o'\]; the feature space "
                                         r"expects"):
        space.validate(FRAME[["a", "c"]])
    with pytest.raises(ValueError, match=r"unexpected column\(s\) \['y'\] not in the feature "
                                         r"space \(drop the target column"):
        space.validate(FRAME.assign(y=1))
    assert space.validate(FRAME.assign(a=[0.0, 2.5, 11.0]), check_bounds=False)["a"][2] == 11.0


def test_serialization(tmp_path):
    space = FeatureSpace.from_frame(FRAME).set("a", perturbation=Perturbation.absolute(1))
    text = space.to_json()
    again = FeatureSpace.from_json(text)
    assert again.to_dict() == space.to_dict() and again["a"] == space["a"]
    assert FeatureSpace.from_json("  " + text).to_dict() == space.to_dict()
    path = tmp_path / "space.json"
    assert space.to_json(str(path)) == path.read_text(encoding="utf-8") == text
    assert FeatureSpace.from_json(str(path)).to_dict() == space.to_dict()
    with pytest.raises(ValueError, match="the text given is not FeatureSpace JSON"):
        FeatureSpace.from_json("{not json")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match=r"'.*bad.json' is not FeatureSpace JSON"):
        FeatureSpace.from_json(str(bad))
    with pytest.raises(ValueError, match="not a serialized FeatureSpace: 'features'"):
        FeatureSpace.from_dict({"feature": []})
    with pytest.raises(ValueError, match="not a serialized FeatureSpace: "):
        FeatureSpace.from_dict({"features": [{"name": "a", "colour": 1}]})


@pytest.mark.parametrize("lower, upper, slack", [
    (0.0, 1e-3, 1e-12),  # at least 1e-12
    (-100.0, 100.0, 2e-10),  # 1e-12 of the range
    (-1000.0, -990.0, 1e-9),  # of |lower|
    (990.0, 1000.0, 1e-9),  # of |upper|
])
def test_codes_within_the_slack_of_a_bound_are_set_on_it(lower, upper, slack):
    space = FeatureSpace([Feature("f", "continuous", lower=lower, upper=upper)])

    def decode(code):
        return space.inverse_transform([[code]])["f"][0]

    assert decode(upper + 0.995 * slack) == upper and decode(lower - 0.995 * slack) == lower
    exact = 1e-12 * max(1.0, upper - lower, abs(lower), abs(upper))  # the slack itself
    assert decode(upper + exact) == upper and decode(lower - exact) == lower
    assert decode(upper + 1.5 * slack) > upper and decode(lower - 1.5 * slack) < lower


def test_the_json_is_indented():
    text = FeatureSpace.from_frame(FRAME).to_json()
    assert text.startswith('{\n  "') and '\n    ' in text


def test_edits_named_in_their_errors_and_ordinal_bounds_by_label():
    space = FeatureSpace.from_frame(FRAME)
    with pytest.raises(ValueError, match=r"^feature 'a': unknown kind 'weird'"):
        space.set("a", kind="weird")
    with pytest.raises(ValueError, match=r"^unknown feature\(s\) \['zz'\]; the space has "):
        space.immutable("zz")
    space.set("o", lower="mid", upper="mid")
    assert (space["o"].lower, space["o"].upper) == (1, 1)


def test_transform_without_the_bounds_check_and_a_shifted_ordinal():
    space = FeatureSpace.from_frame(FRAME)
    with pytest.raises(ValueError):
        space.transform(FRAME.assign(a=[0.0, 2.5, 11.0]))
    assert space.transform(FRAME.assign(a=[0.0, 2.5, 11.0]), check_bounds=False)[2, 0] == 1.1
    ordinal = FeatureSpace([Feature("o", "ordinal", categories=("lo", "mid", "hi"), shift=1.0,
                                    scale=2.0)])
    assert ordinal.encode(pd.DataFrame({"o": ["lo", "hi"]}))[:, 0].tolist() == [-0.5, 0.5]
