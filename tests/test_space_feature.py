"""A raw feature (:mod:`cfopt.space.feature`): the perturbation annotation, the checks of
a declaration with errors naming the feature, and the codes, ranges and spreads a
feature gives."""

from __future__ import annotations

import numpy as np
import pytest

from cfopt.space.feature import Feature, Kind, Perturbation, parse_kind, plain


def test_plain_and_kinds():
    assert type(plain(np.int64(3))) is int and plain(np.int64(3)) == 3
    assert type(plain(np.float32(0.5))) is float and plain("a") == "a"
    assert parse_kind("ordinal", "x") is Kind.ORDINAL
    with pytest.raises(ValueError, match=r"feature 'x': unknown kind 'real'; use one of "
                                         r"\['continuous', 'integer', 'binary', "
                                         r"'categorical', 'ordinal'\]"):
        parse_kind("real", "x")


def test_perturbations():
    p = Perturbation.absolute(1.5, np.float32(0.5))
    assert (p.kind, p.increase, p.decrease) == ("absolute", 1.5, 0.5)
    assert type(p.decrease) is float and p.is_numeric
    assert p.up(-4.0) == 1.5 and p.down(-4.0) == 0.5
    r = Perturbation.relative(increase=0.5)
    assert (r.kind, r.increase, r.decrease) == ("relative", 0.5, 0.0)
    assert r.up(-4.0) == 2.0 and r.up(4.0) == 2.0 and r.down(4.0) == 0.0
    assert Perturbation.relative(decrease=0.25).down(-8.0) == 2.0
    assert Perturbation.absolute().up(3.0) == 0.0 and Perturbation.absolute(2).increase == 2.0
    c = Perturbation.to_categories("a", np.int64(1))
    assert c.categories == ("a", 1) and type(c.categories[1]) is int and not c.is_numeric
    assert c.to_dict() == {"kind": "categories", "categories": ["a", 1]}
    assert p.to_dict() == {"kind": "absolute", "increase": 1.5, "decrease": 0.5}


@pytest.mark.parametrize("args, message", [
    (("shift",), r"perturbation kind must be one of \('absolute', 'relative', "
                 r"'categories'\), got 'shift'"),
    (("categories",), "^a 'categories' perturbation lists the categories a value may "
                      "switch to and has no increase/decrease$"),
    (("categories", 1.0, 0.0, ("a",)), "a 'categories' perturbation lists"),
    (("categories", 0.0, 1.0, ("a",)), "a 'categories' perturbation lists"),
    (("absolute", 0.0, 0.0, ("a",)), "an 'absolute' perturbation takes increase/decrease, "
                                     "not categories"),
    (("absolute", -1.0), "perturbation increase must be a finite magnitude >= 0, got -1.0"),
    (("relative", 0.0, float("inf")), "perturbation decrease must be a finite magnitude >= 0, "
                                      "got inf"),
    (("absolute", True), "perturbation increase must be a finite magnitude >= 0, got True"),
    (("absolute", "1"), "perturbation increase must be a finite magnitude >= 0, got '1'"),
    (("absolute", float("nan")), "perturbation increase must be a finite magnitude"),
])
def test_bad_perturbations(args, message):
    with pytest.raises(ValueError, match=message):
        Perturbation(*args)


def test_zero_magnitudes_are_allowed():
    assert Perturbation("absolute", 0, 0).increase == 0.0
    assert Perturbation("relative", np.int64(2)).increase == 2.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="categorical", categories=("a", "a", "b")),
     r"feature 'f': duplicate categories \('a', 'a', 'b'\)"),
    (dict(kind="categorical"), "categorical feature 'f' needs its categories"),
    (dict(kind="categorical", categories=("a", "b"), direction="increase"),
     "categorical feature 'f' has no order, so it cannot be increase-only; declare it "
     "ordinal instead"),
    (dict(kind="categorical", categories=("a", "b"), lower=0),
     "categorical feature 'f' has no numeric bounds"),
    (dict(kind="categorical", categories=("a", "b"), upper=1),
     "categorical feature 'f' has no numeric bounds"),
    (dict(kind="ordinal", categories=("a",)), "ordinal feature 'f' needs at least two ordered "
                                              "levels"),
    (dict(kind="binary", categories=("a", "b", "c")),
     r"binary feature 'f': give exactly two labels \(for 0 and 1\), got \('a', 'b', 'c'\)"),
    (dict(kind="binary", categories=("a",)), "binary feature 'f': give exactly two labels"),
    (dict(kind="continuous", categories=("a", "b"), lower=0, upper=1),
     "continuous feature 'f' takes no categories"),
    (dict(kind="integer", categories=("a", "b"), lower=0, upper=1),
     "integer feature 'f' takes no categories"),
    (dict(kind="continuous", lower=0), r"feature 'f' needs finite lower and upper bounds "
                                       r"\(big-M formulations are built from them\)"),
    (dict(kind="continuous", upper=0), "feature 'f' needs finite lower and upper bounds"),
    (dict(kind="continuous", lower=0, upper=float("inf")),
     r"feature 'f': bounds must be finite, got \[0.0, inf\]"),
    (dict(kind="continuous", lower=float("-inf"), upper=0), "bounds must be finite"),
    (dict(kind="continuous", lower=2, upper=1), "feature 'f': lower bound 2.0 is above upper "
                                                "bound 1.0"),
    (dict(kind="integer", lower=0, upper=2.5), r"integer feature 'f': bounds must be "
                                               r"integers, got \[0.0, 2.5\]"),
    (dict(kind="ordinal", categories=("a", "b", "c"), lower=0.5),
     "ordinal feature 'f': bounds must be integers"),
    (dict(kind="binary", lower=-1), r"binary feature 'f': bounds must lie in \[0, 1\]"),
    (dict(kind="binary", upper=2), r"binary feature 'f': bounds must lie in \[0, 1\]"),
    (dict(kind="ordinal", categories=("a", "b", "c"), upper=3),
     r"ordinal feature 'f': bounds are level positions in \[0, 2\]"),
    (dict(kind="ordinal", categories=("a", "b", "c"), lower=-1),
     r"ordinal feature 'f': bounds are level positions in \[0, 2\]"),
    (dict(kind="continuous", lower=0, upper=1, scale=-1.0),
     "feature 'f': scale must be positive and finite, got -1.0"),
    (dict(kind="continuous", lower=0, upper=1, scale=float("inf")),
     "scale must be positive and finite, got inf"),
    (dict(kind="continuous", lower=0, upper=1, shift=float("nan")),
     "feature 'f': shift must be finite, got nan"),
    (dict(kind="continuous", lower=0, upper=1, direction="up"),
     r"feature 'f': direction must be one of \('any', 'increase', 'decrease'\), got 'up'"),
])
def test_bad_declarations(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Feature("f", **kwargs)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(kind="continuous", lower=0, upper=1, perturbation=Perturbation.to_categories(1)),
     ValueError, "feature 'f': a 'categories' perturbation needs a categorical, ordinal or "
                 "binary feature, not continuous"),
    (dict(kind="categorical", categories=("a", "b"),
          perturbation=Perturbation.to_categories("a", "z")),
     ValueError, r"feature 'f': perturbation categories \['z'\] are not among its "
                 r"categories \['a', 'b'\]"),
    (dict(kind="binary", perturbation=Perturbation.to_categories(2)),
     ValueError, r"perturbation categories \[2\] are not among its categories \[0, 1\]"),
    (dict(kind="categorical", categories=("a", "b"), perturbation=Perturbation.absolute(1)),
     ValueError, "categorical feature 'f' has no numeric perturbation; give the categories "
                 "it may switch to"),
    (dict(kind="continuous", lower=0, upper=1, perturbation=3),
     TypeError, "feature 'f': perturbation must be a cfopt.Perturbation, got int"),
    (dict(kind="continuous", lower=0, upper=1, perturbation={"kind": "absolute", "up": 1}),
     ValueError, "feature 'f': not a perturbation: "),
])
def test_bad_perturbation_of_a_feature(kwargs, error, message):
    with pytest.raises(error, match=message):
        Feature("f", **kwargs)


def test_a_perturbation_from_a_mapping_and_on_a_binary():
    f = Feature("f", "continuous", lower=0, upper=1,
                perturbation={"kind": "relative", "increase": 0.5})
    assert f.perturbation == Perturbation.relative(0.5)
    b = Feature("b", "binary", perturbation=Perturbation.to_categories(1))
    assert b.perturbation.categories == (1,)
    o = Feature("o", "ordinal", categories=("x", "y"), perturbation=Perturbation.to_categories("y"))
    assert o.perturbation.categories == ("y",)


def test_defaults_and_implied_bounds():
    b = Feature("b", "binary")
    assert (b.lower, b.upper) == (0.0, 1.0) and type(b.lower) is float
    o = Feature("o", Kind.ORDINAL, categories=("x", "y", "z"))
    assert (o.lower, o.upper) == (0.0, 2.0)
    assert Feature("o", "ordinal", categories=("x", "y", "z"), lower=1).lower == 1.0
    assert Feature("o", "ordinal", categories=("x", "y", "z"), upper=1).upper == 1.0
    c = Feature("c", "categorical", categories=("p", "q"))
    assert c.lower is None and c.upper is None and c.kind is Kind.CATEGORICAL
    i = Feature("i", "integer", lower=np.int64(2), upper=2)
    assert (i.lower, i.upper) == (2.0, 2.0) and type(i.upper) is float
    f = Feature("f", "continuous", lower=0, upper=1)
    assert (f.immutable, f.direction, f.shift, f.scale, f.spread, f.mad, f.perturbation) == (
        False, "any", 0.0, 1.0, None, None, None)
    assert Feature("f", "continuous", lower=-1, upper=-1).upper == -1.0
    assert Feature("n", "binary", lower=0, upper=0).upper == 0.0


def test_encoding_properties():
    c = Feature("c", "categorical", categories=("p", "q"))
    b = Feature("b", "binary")
    lb = Feature("lb", "binary", categories=("no", "yes"))
    o = Feature("o", "ordinal", categories=("x", "y", "z"))
    i = Feature("i", "integer", lower=0, upper=9)
    f = Feature("f", "continuous", lower=0, upper=1)
    assert [x.is_onehot for x in (c, b, o, i, f)] == [True, False, False, False, False]
    assert [x.is_integral for x in (c, b, o, i, f)] == [False, True, True, True, False]
    assert [x.labelled for x in (c, b, lb, o, i)] == [True, False, True, True, False]
    assert c.input_names == ["c=p", "c=q"] and o.input_names == ["o"]
    assert o.to_code("z") == 2.0 and lb.to_code("yes") == 1.0 and i.to_code(3) == 3.0
    assert o.to_code(np.str_("y")) == 1.0 and type(i.to_code(np.int64(3))) is float
    with pytest.raises(ValueError, match=r"column 'o': unseen category 'w'; known categories: "
                                         r"\['x', 'y', 'z'\]"):
        o.to_code("w")
    with pytest.raises(TypeError, match="categorical feature 'c' has no numeric code"):
        c.to_code("p")
    assert o.from_code(1.4) == "y" and o.from_code(1.6) == "z" and lb.from_code(0.0) == "no"
    assert i.from_code(2.6) == 3 and type(i.from_code(2.6)) is int
    assert f.from_code(0.25) == 0.25 and type(f.from_code(np.float32(0.5))) is float


def test_actionable_ranges():
    f = Feature("f", "continuous", lower=0, upper=10)
    assert f.actionable_range(4.0) == (0.0, 10.0)
    assert f.actionable_range(4.0, 2.0, 6.0) == (2.0, 6.0)
    assert f.actionable_range(4.0, lower=1.0) == (1.0, 10.0)
    assert f.actionable_range(4.0, upper=7.0) == (0.0, 7.0)
    up = Feature("f", "continuous", lower=0, upper=10, direction="increase")
    assert up.actionable_range(4.0) == (4.0, 10.0) and up.actionable_range(4.0, 1, 8) == (4.0, 8)
    down = Feature("f", "continuous", lower=0, upper=10, direction="decrease")
    assert down.actionable_range(4.0) == (0.0, 4.0)
    assert down.actionable_range(4.0, 1, 8) == (1, 4.0)
    fixed = Feature("f", "continuous", lower=0, upper=10, immutable=True, direction="increase")
    assert fixed.actionable_range(4.0) == (4.0, 4.0)


def test_weight_spreads():
    assert Feature("c", "categorical", categories=("p", "q"), ).weight_spread == 1.0
    assert Feature("f", "continuous", lower=0, upper=10).weight_spread == 10.0
    assert Feature("f", "continuous", lower=0, upper=10, spread=4.0).weight_spread == 4.0
    assert Feature("f", "continuous", lower=0, upper=10, spread=0.0).weight_spread == 1.0
    assert Feature("f", "continuous", lower=3, upper=3).weight_spread == 1.0
    assert Feature("f", "continuous", lower=0, upper=0.5).weight_spread == 0.5


def test_to_dict():
    f = Feature("o", "ordinal", categories=("x", "y"), perturbation=Perturbation.to_categories("y"))
    d = f.to_dict()
    assert d["kind"] == "ordinal" and d["categories"] == ["x", "y"]
    assert d["perturbation"] == {"kind": "categories", "categories": ["y"]}
    assert Feature(**d) == f
    assert Feature("f", "continuous", lower=0, upper=1).to_dict()["perturbation"] is None


def test_the_default_magnitudes_and_a_bad_kind_named():
    assert Perturbation.absolute(2.0).decrease == 0.0
    assert Perturbation.relative(decrease=0.3).increase == 0.0
    with pytest.raises(ValueError, match="^feature 'f': unknown kind 'real'"):
        Feature("f", "real", lower=0, upper=1)
