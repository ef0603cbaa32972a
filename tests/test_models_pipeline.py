"""sklearn preprocessing parsed into input specs (:mod:`cfopt.models.pipeline`) on tiny
hand-built pipelines, without a solver: the specs must compute exactly what the
pipeline's own ``transform`` computes, on every combination of the space's values
(categories the encoders never saw included), and each unsupported step or mismatch
with the feature space is refused with a message naming it."""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    StandardScaler,
)

import cfopt
from cfopt.errors import UnsupportedModelError
from cfopt.models.pipeline import PipelineAdapter, _reaches_zero, _select
from cfopt.space.encoding import InputSpec, encode

RNG = np.random.default_rng(0)
N = 40
X = pd.DataFrame({"x": RNG.uniform(-3, 5, N).round(2), "n": RNG.integers(1, 9, N),
                  "c": RNG.choice(["red", "green", "blue"], N),
                  "o": RNG.choice(["lo", "mid", "hi"], N), "b": RNG.choice(["no", "yes"], N)})
Y = (X["x"] + (X["c"] == "red") > 1).astype(int)
LEVELS = ("lo", "mid", "hi")


def space(c: tuple[str, ...] = ("blue", "green", "red")) -> cfopt.FeatureSpace:
    """The space of X (``o`` ordinal lo < mid < hi, ``b`` a labelled binary), with the
    categories ``c`` (some perhaps no encoder saw)."""
    kinds = {"o": "ordinal", "b": "binary", "c": "categorical"}
    return cfopt.FeatureSpace.from_frame(X[X["c"].isin(c)], kinds=kinds,
                                         categories={"o": list(LEVELS), "c": list(c)})


def grid(s: cfopt.FeatureSpace) -> pd.DataFrame:
    """Every combination of a few values per feature (each category, both bounds)."""
    values = [f.categories if f.labelled else (f.from_code(f.lower), f.from_code(f.upper),
                                                 f.from_code((f.lower + f.upper) / 2))
              for f in s]
    return pd.DataFrame(list(itertools.product(*values)), columns=s.names)


def fit(pre, final=None) -> Pipeline:
    return Pipeline([("pre", pre), ("model", final or LinearRegression())]).fit(X, Y)


def assert_exact(pipe: Pipeline, s: cfopt.FeatureSpace) -> list[InputSpec]:
    """The specs' inputs equal the pipeline's own on every grid row."""
    adapter = PipelineAdapter(pipe)
    specs = adapter.input_specs(s)
    rows = grid(s)
    np.testing.assert_allclose(encode(s, specs, rows), adapter.model_inputs(s, rows),
                               rtol=1e-12, atol=1e-12)
    return specs


ORDINAL = OrdinalEncoder(categories=[list(LEVELS)])
PIPELINES = {
    "scalers": lambda: ColumnTransformer([
        ("x", StandardScaler(), ["x"]), ("n", MinMaxScaler((-1, 2)), ["n"]),
        ("onehot", OneHotEncoder(), ["c", "b"]), ("o", ORDINAL, ["o"])]),
    "chained": lambda: ColumnTransformer([
        ("num", Pipeline([("std", StandardScaler()), ("mm", MinMaxScaler((-1, 2))),
                          ("abs", MaxAbsScaler())]), ["x", "n"]),
        ("o", Pipeline([("code", ORDINAL), ("std", StandardScaler())]), ["o"]),
        ("c", Pipeline([("code", OrdinalEncoder()), ("std", StandardScaler())]), ["c"]),
        ("b", OneHotEncoder(drop="if_binary"), ["b"])]),
    "no mean, no std": lambda: ColumnTransformer([
        ("x", StandardScaler(with_mean=False), ["x"]),
        ("n", StandardScaler(with_std=False), ["n"]),
        ("cat", OneHotEncoder(drop="first"), ["c", "b"]), ("o", ORDINAL, ["o"])]),
    "by position": lambda: ColumnTransformer([
        ("num", MaxAbsScaler(), [0, np.int64(1)]), ("cat", OneHotEncoder(), slice(2, 3)),
        ("o", ORDINAL, [3]), ("b", OneHotEncoder(), [4])]),
    "passthrough": lambda: ColumnTransformer([
        ("x", "passthrough", ["x"]), ("n", Pipeline([("impute", SimpleImputer()),
                                                    ("none", None)]), ["n"]),
        ("gone", "drop", ["x"]), ("cat", OneHotEncoder(drop=["blue", "no"]), ["c", "b"])],
        remainder=ORDINAL),  # o, the one column left
    "steps": lambda: Pipeline([("ct", ColumnTransformer([
        ("num", "passthrough", ["x", "n"]), ("cat", OneHotEncoder(), ["c", "b"]),
        ("o", ORDINAL, ["o"])], remainder="passthrough")), ("scale", "passthrough")]),
    "the remainder passed through": lambda: ColumnTransformer([
        ("cat", OneHotEncoder(), ["c", "b"]), ("o", ORDINAL, ["o"])],
        remainder="passthrough"),
}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_specs_compute_what_the_pipeline_computes(name):
    pipe = fit(PIPELINES[name]())
    specs = assert_exact(pipe, space())
    adapter = PipelineAdapter(pipe)
    assert len(specs) == adapter.final.n_inputs == len(adapter.columns)


def test_the_specs_of_a_column_transformer():
    pipe = fit(PIPELINES["scalers"]())
    specs = assert_exact(pipe, space())
    scaler, minmax = pipe["pre"].named_transformers_["x"], pipe["pre"].named_transformers_["n"]
    assert specs[0] == InputSpec("affine", "x", 1 / scaler.scale_[0],
                                 -scaler.mean_[0] / scaler.scale_[0])
    assert specs[1] == InputSpec("affine", "n", minmax.scale_[0], minmax.min_[0])
    assert specs[2:5] == [InputSpec("indicator", "c", level=lv)
                          for lv in ("blue", "green", "red")]
    # the labelled binary's two indicators: code 0 ("no") and code 1 ("yes")
    assert specs[5:7] == [InputSpec("affine", "b", -1.0, 1.0), InputSpec("affine", "b")]
    assert specs[7] == InputSpec("affine", "o", 1.0, 0.0)  # lo, mid, hi -> 0, 1, 2


def test_unknown_categories_ignored_or_encoded():
    """A category of the space no encoder saw: every indicator 0 (handle_unknown=
    'ignore'), or the OrdinalEncoder's unknown_value; an encoder's level the space lacks
    is a constant 0 input."""
    seen = X[X["c"] != "blue"]
    pre = ColumnTransformer([
        ("num", "passthrough", ["x", "n"]),
        ("onehot", OneHotEncoder(handle_unknown="ignore"), ["c"]),
        ("code", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-7),
         ["c"]), ("o", ORDINAL, ["o"]), ("b", OneHotEncoder(), ["b"])])
    pipe = Pipeline([("pre", pre), ("model", LinearRegression())]).fit(seen, Y[seen.index])
    specs = assert_exact(pipe, space(c=("blue", "green", "red", "pink")))
    assert specs[4] == InputSpec("levels", "c", codes=(("blue", -7), ("green", 0),
                                                      ("red", 1), ("pink", -7)))
    narrow = space(c=("green", "red"))
    narrow_rows = grid(narrow)
    specs = PipelineAdapter(fit(PIPELINES["scalers"]())).input_specs(narrow)
    assert specs[2] == InputSpec("constant", b=0.0)  # "blue": not a category of the space
    np.testing.assert_array_equal(encode(narrow, specs, narrow_rows)[:, 2], 0.0)


def test_an_ordinal_encoder_in_another_order_is_affine_or_refused():
    """hi, mid, lo: codes 2, 1, 0 of the label positions 0, 1, 2 (affine, slope -1);
    mid, lo, hi: no affine function of the positions."""
    reverse = fit(ColumnTransformer([("num", "passthrough", ["x", "n"]),
                                     ("o", OrdinalEncoder(categories=[["hi", "mid", "lo"]]),
                                      ["o"]), ("cat", OneHotEncoder(), ["c", "b"])]))
    specs = assert_exact(reverse, space())
    assert specs[2] == InputSpec("affine", "o", -1.0, 2.0)
    shuffled = fit(ColumnTransformer([("num", "passthrough", ["x", "n"]),
                                      ("o", OrdinalEncoder(categories=[["mid", "lo", "hi"]]),
                                       ["o"]), ("cat", OneHotEncoder(), ["c", "b"])]))
    with pytest.raises(UnsupportedModelError, match=(
            r"^the OrdinalEncoder codes the ordinal feature 'o' in the order \['mid', 'lo', "
            r"'hi'\], not as a linear function of its label order \['lo', 'mid', 'hi'\]; "
            r"declare it categorical \(FeatureSpace.from_frame\(\.\.\., kinds=\{'o': "
            r"'categorical'\}\)\) or give it the encoder's order \(categories=\{'o': "
            r"\['mid', 'lo', 'hi'\]\}\)$")):
        PipelineAdapter(shuffled).input_specs(space())


def test_an_ordinal_binary_and_unknown_codes():
    """A labelled binary coded by an OrdinalEncoder: affine in its code. A category
    unknown to an encoder that errs on it is refused, as is one coded NaN."""
    def pipe(encoder, seen=X):
        pre = ColumnTransformer([("num", "passthrough", ["x", "n"]), ("b", encoder, ["b"]),
                                 ("cat", OneHotEncoder(handle_unknown="ignore"), ["c"]), ORD])
        return Pipeline([("pre", pre), ("model", LinearRegression())]).fit(seen, Y[seen.index])

    specs = assert_exact(pipe(OrdinalEncoder(categories=[["yes", "no"]])), space())
    assert specs[2] == InputSpec("affine", "b", -1.0, 1.0)
    only_no = X[X["b"] == "no"]
    with pytest.raises(ValueError, match=r"^category 'yes' of feature 'b' is unknown to the "
                                         r"pipeline's OrdinalEncoder \(handle_unknown='error'\)$"):
        PipelineAdapter(pipe(OrdinalEncoder(), only_no)).input_specs(space())
    nan = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan)
    with pytest.raises(UnsupportedModelError, match=(
            r"^the OrdinalEncoder maps category 'yes' of feature 'b', unknown to it, to NaN "
            r"\(unknown_value=nan\), which no model input can take; give it an integer "
            r"unknown_value or fit it on every category$")):
        PipelineAdapter(pipe(nan, only_no)).input_specs(space())
    unknown = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=5)
    specs = assert_exact(pipe(unknown, only_no), space())
    assert specs[2] == InputSpec("affine", "b", 5.0, 0.0)  # no -> 0, yes -> 5


def refused(pre, message: str, s=None, error=UnsupportedModelError, final=None) -> None:
    with pytest.raises(error, match=message):
        PipelineAdapter(fit(pre, final)).input_specs(s or space())


NUM = ("num", "passthrough", ["x", "n"])
CAT = ("cat", OneHotEncoder(), ["c", "b"])
ORD = ("o", ORDINAL, ["o"])


def test_unsupported_steps_are_named():
    refused(ColumnTransformer([("poly", PolynomialFeatures(), ["x", "n"]), CAT, ORD]),
            r"^pipeline step 'pre/poly/PolynomialFeatures' is not supported; cfopt encodes "
            r"StandardScaler, MinMaxScaler, MaxAbsScaler, OneHotEncoder, OrdinalEncoder, "
            r"SimpleImputer, ColumnTransformer, passthrough \(the identity "
            r"FunctionTransformer\) and drop$")
    refused(ColumnTransformer([("log", FunctionTransformer(np.log1p), ["n"]),
                               ("x", "passthrough", ["x"]), CAT, ORD]),
            r"^step 'pre/log/FunctionTransformer' applies the function 'log1p', which cfopt "
            r"cannot encode exactly; only the identity FunctionTransformer \(func=None, "
            r"'passthrough'\) is supported$")
    refused(ColumnTransformer([("mm", MinMaxScaler(clip=True), ["x", "n"]), CAT, ORD]),
            r"^step 'pre/mm/MinMaxScaler': MinMaxScaler\(clip=True\) is not linear$")
    refused(ColumnTransformer([NUM, ORD, ("cat", Pipeline([("hot", OneHotEncoder()), (
        "scale", MaxAbsScaler())]), ["c", "b"])]),
        r"^step 'pre/cat/scale/MaxAbsScaler' scales one-hot columns; put scalers before "
        r"the OneHotEncoder$")
    for step in (StandardScaler(), MinMaxScaler(), MaxAbsScaler(), OrdinalEncoder()):
        for second in (OneHotEncoder(handle_unknown="ignore"), OrdinalEncoder(
                handle_unknown="use_encoded_value", unknown_value=-1)):
            refused(ColumnTransformer([("x", "passthrough", ["x"]), CAT, ORD, (
                "n", Pipeline([("first", step), ("second", second)]), ["n"])]),
                rf"^step 'pre/n/second/{type(second).__name__}' must receive raw columns$")
    for encoder in (OneHotEncoder(min_frequency=15), OrdinalEncoder(max_categories=2)):
        refused(ColumnTransformer([NUM, ORD, ("cat", encoder, ["c", "b"])]),
                rf"^step 'pre/cat/{type(encoder).__name__}': infrequent-category grouping "
                r"\(min_frequency / max_categories\) is not supported; fit the encoder "
                r"without it$")
    refused(ColumnTransformer([("num", "passthrough", [True, True, False, False, False]),
                               CAT, ORD]), r"^pre/num: boolean column masks are not supported$")


def test_a_step_given_by_an_unknown_name_is_refused():
    pipe = fit(ColumnTransformer([NUM, CAT, ORD]))
    pipe.steps.insert(1, ("later", "magic"))
    with pytest.raises(UnsupportedModelError, match=r"^pipeline step later/'magic' is not "
                                                    r"supported$"):
        PipelineAdapter(pipe)


def test_features_the_encoders_do_not_match():
    refused(ColumnTransformer([NUM, ("x", OrdinalEncoder(), ["x"]), CAT, ORD]),
            r"^the OrdinalEncoder encodes column 'x', which the feature space declares "
            r"continuous \(numbers, no categories\); declare it categorical "
            r"\(FeatureSpace.from_frame\(\.\.\., kinds=\{'x': 'categorical'\}\)\)$")
    for kind, column in (("ordinal", "o"), ("integer", "n")):
        others = [c for c in ("n", "o") if c != column]
        refused(ColumnTransformer([("x", "passthrough", ["x"]), ("hot", OneHotEncoder(), [column]),
                                   ("other", OrdinalEncoder(), others), CAT]),
                rf"^the OneHotEncoder expands column '{column}', which the feature space "
                rf"declares {kind}; declare it categorical \(FeatureSpace.from_frame\(\.\.\., "
                rf"kinds=\{{'{column}': 'categorical'\}}\)\)$")
    for column in ("c", "b"):  # numbers in the pipeline's data, labels in the space
        numbers = X.assign(**{column: X[column].factorize()[0]})
        pipe = Pipeline([("pre", ColumnTransformer([NUM, ORD, ("cat", OneHotEncoder(), [
            c for c in ("c", "b") if c != column])], remainder="passthrough")),
            ("model", LinearRegression())]).fit(numbers, Y)
        with pytest.raises(UnsupportedModelError, match=(
                rf"^column '{column}' holds labels but reaches the estimator without a "
                r"OneHotEncoder or OrdinalEncoder$")):
            PipelineAdapter(pipe).input_specs(space())
    only_red = X[X["c"] == "red"]
    pipe = Pipeline([("pre", ColumnTransformer([NUM, CAT, ORD])),
                     ("model", LinearRegression())])
    pipe.fit(only_red, Y[only_red.index])
    with pytest.raises(ValueError, match=r"^categories \['blue', 'green'\] of feature 'c' are "
                                         r"unknown to the pipeline's OneHotEncoder "
                                         r"\(handle_unknown='error'\)$"):
        PipelineAdapter(pipe).input_specs(space())


def test_columns_the_space_does_not_match():
    adapter = PipelineAdapter(fit(ColumnTransformer([NUM, CAT, ORD])))
    other = cfopt.FeatureSpace.from_frame(X.drop(columns="n").assign(extra=1.0))
    with pytest.raises(ValueError, match=r"^the pipeline was fitted on columns \['x', 'n', 'c', "
                                         r"'o', 'b'\]; the feature space has \['x', 'c', 'o', "
                                         r"'b', 'extra'\] \(missing \['n'\], extra "
                                         r"\['extra'\]\)$"):
        adapter.input_specs(other)
    assert adapter.raw_columns == ["x", "n", "c", "o", "b"]


def test_a_pipeline_fitted_without_column_names_is_refused():
    pipe = Pipeline([("scale", StandardScaler()), ("model", LinearRegression())])
    pipe.fit(X[["x", "n"]].to_numpy(), Y)
    with pytest.raises(UnsupportedModelError, match=r"^the Pipeline was not fitted on a pandas "
                                                    r"DataFrame; fit it on the raw DataFrame"):
        PipelineAdapter(pipe)


def test_a_final_estimator_of_another_width_is_refused():
    pipe = fit(ColumnTransformer([NUM, CAT, ORD]))
    other = cfopt.models.parse_model(LinearRegression().fit(np.ones((3, 2)), [0, 1, 2]))
    with pytest.raises(UnsupportedModelError, match=r"^the preprocessing yields 8 columns but "
                                                    r"the final estimator takes 2$"):
        PipelineAdapter(pipe, final=other)


def test_the_adapter_predicts_as_the_pipeline():
    pipe = fit(ColumnTransformer([("x", StandardScaler(), ["x", "n"]), CAT, ORD]),
               LogisticRegression())
    adapter = PipelineAdapter(pipe)
    s = space()
    rows = grid(s)
    Z = adapter.model_inputs(s, rows)
    assert Z.dtype == np.float64 and Z.shape == (len(rows), 8)
    np.testing.assert_array_equal(adapter.predict_rows(s, rows[s.names[::-1]]),
                                  pipe.predict(rows))
    np.testing.assert_array_equal(adapter.predict(Z), pipe.predict(rows))
    np.testing.assert_allclose(adapter.output(Z), adapter.final.output(Z))
    logits = pipe.decision_function(rows)
    np.testing.assert_allclose(adapter.output_from_logits(logits),
                               adapter.final.output_from_logits(logits))
    assert adapter.kind == f"Pipeline({adapter.final.kind})"
    assert adapter.classes is adapter.final.classes
    assert adapter.structure is adapter.final.structure
    assert adapter.decision == adapter.final.decision
    sparse = fit(ColumnTransformer([NUM, CAT, ORD], sparse_threshold=1.0))
    assert sparse["pre"].sparse_output_
    np.testing.assert_allclose(PipelineAdapter(sparse).model_inputs(s, rows),
                               sparse[:-1].transform(rows).toarray(), rtol=0, atol=0)


@pytest.mark.parametrize("spec, zero", [
    (InputSpec("constant", b=0.0), True), (InputSpec("constant", b=2.0), False),
    (InputSpec("levels", "c", 2.0, -2.0, codes=(("a", 0), ("b", 1))), True),
    (InputSpec("levels", "c", 2.0, -1.0, codes=(("a", 0), ("b", 1))), False),
    (InputSpec("levels", "c", 1.0, -5.0, codes=(("a", 5), ("b", 7))), True),  # code 5
    (InputSpec("affine", "x", 0.0, 0.0), True), (InputSpec("affine", "x", 0.0, 1.0), False),
    (InputSpec("affine", "x", 2.0, -4.0), True),  # x = 2 within [0, 10]
    (InputSpec("affine", "x", 1.0, 1.0), False),  # x = -1 below
    (InputSpec("affine", "x", 1.0, -10.0), True),  # x = 10, the upper bound
    (InputSpec("affine", "x", 1.0, -10.5), False),  # x = 10.5 above
    (InputSpec("affine", "x", 1.0, 0.0), True),  # x = 0, the lower bound
    (InputSpec("affine", "n", 2.0, -5.0), False),  # n = 2.5: no integer
    (InputSpec("affine", "n", 2.0, -6.0), True),  # n = 3
    (InputSpec("affine", "o", 1.0, -2.0), True),  # the third level
    (InputSpec("affine", "o", 1.0, -3.0), False),  # a fourth level: none
    (InputSpec("affine", "o", 2.0, -1.0), False),  # code 0.5
])
def test_reaches_zero(spec, zero):
    s = cfopt.FeatureSpace([cfopt.Feature("x", "continuous", 0.0, 10.0),
                            cfopt.Feature("n", "integer", 0.0, 5.0),
                            cfopt.Feature("o", "ordinal", categories=LEVELS),
                            cfopt.Feature("c", "categorical", categories=("a", "b"))])
    assert _reaches_zero(spec, s) is zero


def test_column_selections():
    names = ["x", "n", "c"]
    assert _select("n", names, "w") == ["n"]
    assert _select(["c", "x"], names, "w") == ["c", "x"]
    assert _select(np.array(["c"]), names, "w") == ["c"]
    assert _select([2, np.int64(0)], names, "w") == ["c", "x"]
    assert _select(np.array([1, 2]), names, "w") == ["n", "c"]
    assert _select(slice(1, None), names, "w") == ["n", "c"]
    with pytest.raises(UnsupportedModelError, match="^w: boolean column masks are not "
                                                    "supported$"):
        _select(np.array([True, False, True]), names, "w")


def reading_zero_as_missing(pipe: Pipeline, at: list[int], seen: list):
    """The pipeline's final estimator parsed, as one that reads an exact 0 of a sparse
    input as missing at inputs ``at`` (as XGBoost does), recording the binary flags."""
    final = cfopt.models.parse_model(pipe[-1])

    def read_zero_as_missing(binary: list[bool]) -> list[int]:
        seen.append(binary)
        return at

    final.read_zero_as_missing = read_zero_as_missing
    return final


SPARSE_ZERO = (r"^the pipeline hands {kind} a sparse matrix, where an exact 0 of input "
               r"'{source}' is read as missing and goes another way than its value, and the "
               r"feature space reaches that 0; give the estimator dense input "
               r"\(ColumnTransformer\(\.\.\., sparse_threshold=0\) or "
               r"OneHotEncoder\(sparse_output=False\)\)$")


@pytest.mark.parametrize("nested", [False, True])
def test_a_sparse_zero_read_as_missing_is_refused_where_reachable(nested):
    """Scaled x reaches its 0 (the mean is within the bounds); n + 3 never does."""
    def pipe(threshold: float) -> Pipeline:
        pre = ColumnTransformer([("x", StandardScaler(), ["x"]), ("n", MinMaxScaler(
            (3, 4)), ["n"]), CAT, ORD], sparse_threshold=threshold)
        return fit(Pipeline([("ct", pre)]) if nested else pre)

    seen: list = []
    sparse = pipe(1.0)
    with pytest.raises(UnsupportedModelError, match=SPARSE_ZERO.format(kind="LinearRegression",
                                                                       source="x")):
        PipelineAdapter(sparse, reading_zero_as_missing(sparse, [1, 0], seen)).input_specs(
            space())
    assert seen == [[False, False, True, True, True, True, True, False]]  # x, n, c (3), b (2), o
    specs = PipelineAdapter(sparse, reading_zero_as_missing(sparse, [1], seen)).input_specs(
        space())
    assert specs[1].feature == "n"
    dense = pipe(0.0)
    PipelineAdapter(dense, reading_zero_as_missing(dense, [0], seen)).input_specs(space())
    assert len(seen) == 2  # a dense input is never read so


def test_a_sparse_one_hot_encoder_as_the_last_step():
    s = cfopt.FeatureSpace.from_frame(X[["c", "b"]], kinds={"c": "categorical"})
    seen: list = []
    for sparse in (True, False):
        pipe = Pipeline([("hot", OneHotEncoder(sparse_output=sparse)),
                         ("model", LinearRegression())]).fit(X[["c", "b"]], Y)
        final = reading_zero_as_missing(pipe, [4], seen)
        if sparse:
            with pytest.raises(UnsupportedModelError,
                               match=SPARSE_ZERO.format(kind="LinearRegression", source="b")):
                PipelineAdapter(pipe, final).input_specs(s)
        else:
            PipelineAdapter(pipe, final).input_specs(s)
    assert seen == [[True] * 5]


RATED = pd.DataFrame({"r": [2, 5, 8, 2, 5, 8, 8], "x": [0.1, 0.5, 0.2, 0.9, 0.3, 0.4, 0.8]})


def test_an_ordinal_of_numbers_reaching_the_estimator_raw():
    """Ordinal levels 2 < 5 < 8 (codes 0, 1, 2) passed through, or scaled: the estimator
    reads the label, 2 + 3 k (cfopt once read the code k); levels that are no evenly
    spaced numbers are refused."""
    s = cfopt.FeatureSpace.from_frame(RATED, kinds={"r": "ordinal"})
    for step in ("passthrough", StandardScaler()):
        pipe = Pipeline([("pre", ColumnTransformer([("r", step, ["r"]),
                                                    ("x", "passthrough", ["x"])])),
                         ("model", LinearRegression())]).fit(RATED, 2 * RATED.r + RATED.x)
        specs = assert_exact(pipe, s)
        if step == "passthrough":
            assert specs[0] == InputSpec("affine", "r", 3.0, 2.0)
    uneven = cfopt.FeatureSpace.from_frame(RATED.replace({"r": {8: 6}}), kinds={"r": "ordinal"})
    words = cfopt.FeatureSpace.from_frame(RATED.replace({"r": {2: "a", 5: "b", 8: "c"}}),
                                          kinds={"r": "ordinal"})
    for other, labels in ((uneven, "[2, 5, 6]"), (words, "['a', 'b', 'c']")):
        with pytest.raises(UnsupportedModelError, match=re.escape(
                f"column 'r' reaches the estimator as its raw labels {labels}, which are no "
                f"evenly spaced numbers, while cfopt encodes the ordinal feature by its "
                f"labels' positions; encode it with an OrdinalEncoder or declare it "
                f"categorical")):
            PipelineAdapter(pipe).input_specs(other)


def test_an_ordinal_encoders_numeric_categories_are_named_plainly():
    """The encoder's categories as Python numbers in the message (not np.int64(1))."""
    s = cfopt.FeatureSpace.from_frame(RATED, kinds={"r": "ordinal"}, categories={"r": [5, 2, 8]})
    pipe = Pipeline([("pre", ColumnTransformer([("r", OrdinalEncoder(), ["r"]),
                                                ("x", "passthrough", ["x"])])),
                     ("model", LinearRegression())]).fit(RATED, RATED.x)
    with pytest.raises(UnsupportedModelError, match=re.escape(
            "codes the ordinal feature 'r' in the order [2, 5, 8], not as a linear function "
            "of its label order [5, 2, 8]")):
        PipelineAdapter(pipe).input_specs(s)


def test_dropped_columns_are_never_selected():
    """A 'drop' entry's columns, even a boolean mask, are skipped."""
    mask = [False, True, False, False, False]
    pipe = fit(ColumnTransformer([("x", "passthrough", ["x"]), ("gone", "drop", mask), CAT,
                                  ORD]))
    assert [spec.feature for spec in assert_exact(pipe, space())] == ["x"] + ["c"] * 3 + [
        "b", "b", "o"]


@pytest.mark.parametrize("scaler", [StandardScaler(), MinMaxScaler(), MaxAbsScaler()])
def test_a_scaler_after_a_one_hot_encoder_is_named(scaler):
    refused(ColumnTransformer([NUM, ORD, ("cat", Pipeline([("hot", OneHotEncoder(
        sparse_output=False)), ("scale", scaler)]), ["c", "b"])]),
        rf"^step 'pre/cat/scale/{type(scaler).__name__}' scales one-hot columns; put "
        r"scalers before the OneHotEncoder$")


def test_a_function_without_a_name_is_shown_by_its_repr():
    func = functools.partial(np.multiply, 2.0)
    refused(ColumnTransformer([("twice", FunctionTransformer(func), ["x", "n"]), CAT, ORD]),
            "^step 'pre/twice/FunctionTransformer' applies the function " + re.escape(
                repr(repr(func))) + ", which cfopt")


def test_an_encoder_whose_grouping_groups_nothing_is_exact():
    """min_frequency=1: every category frequent, nothing grouped."""
    assert_exact(fit(ColumnTransformer([NUM, ORD, ("cat", OneHotEncoder(min_frequency=1),
                                                    ["c", "b"])])), space())


def test_more_preprocessing_steps_after_the_column_transformer():
    pipe = Pipeline([("ct", ColumnTransformer([NUM, ORD])), ("scale", StandardScaler()),
                     ("model", LinearRegression())]).fit(X, Y)
    specs = assert_exact(pipe, space())
    assert [spec.feature for spec in specs] == ["x", "n", "o"]


def test_integer_inputs_come_back_as_floats():
    pipe = Pipeline([("ct", ColumnTransformer([("n", "passthrough", ["n"])])),
                     ("model", LinearRegression())]).fit(X, Y)
    assert pipe[:-1].transform(X).dtype.kind == "i"
    assert PipelineAdapter(pipe).model_inputs(space(), X).dtype == np.float64


def test_a_dense_last_step_is_never_read_as_sparse():
    seen: list = []
    pipe = Pipeline([("scale", StandardScaler()), ("model", LinearRegression())])
    pipe.fit(X[["x", "n"]], Y)
    s = cfopt.FeatureSpace.from_frame(X[["x", "n"]])
    PipelineAdapter(pipe, reading_zero_as_missing(pipe, [0, 1], seen)).input_specs(s)
    assert seen == []


@pytest.mark.parametrize("drop, message", [
    ("n", r"\(missing \['n'\], extra \[\]\)$"),
    (None, r"\(missing \[\], extra \['extra'\]\)$")])
def test_a_missing_or_an_extra_column_alone(drop, message):
    adapter = PipelineAdapter(fit(ColumnTransformer([NUM, CAT, ORD])))
    frame = X.drop(columns=drop) if drop else X.assign(extra=1.0)
    with pytest.raises(ValueError, match=message):
        adapter.input_specs(cfopt.FeatureSpace.from_frame(frame))


def test_numeric_columns_are_affine_inputs():
    """Scaled or passed through, a numeric column is an affine input, within the bounds
    its feature's give it."""
    from cfopt.space.encoding import spec_bounds

    s = cfopt.FeatureSpace.from_frame(RATED, kinds={"r": "ordinal"})
    pipe = Pipeline([("pre", ColumnTransformer([("r", "passthrough", ["r"]),
                                                ("x", MaxAbsScaler(), ["x"])])),
                     ("model", LinearRegression())]).fit(RATED, RATED.x)
    specs = PipelineAdapter(pipe).input_specs(s)
    assert [spec.kind for spec in specs] == ["affine", "affine"]
    assert spec_bounds(s, specs) == [(2.0, 8.0), (pytest.approx(0.1 / 0.9), 1.0)]
