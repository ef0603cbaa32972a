"""Robustness to adverse perturbations (Virgolin & Fracaros): annotations, the exact
C-setback cost and the exact K-adversary, against brute force on small integer grids."""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import RandomForestClassifier
from sklearn.neural_network import MLPClassifier

import cfopt
from cfopt import Perturbation
from cfopt.space import perturbations as P
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

from .conftest import IN_CI, train_torch

# ---------------------------------------------------------------- small integer world


def grid_space(perturbations: dict[str, Perturbation | None]) -> FeatureSpace:
    """Three integer features on 0..6 and one categorical with three levels."""
    feats = [Feature(n, "integer", lower=0, upper=6, shift=0, scale=6, spread=6,
                     perturbation=perturbations.get(n)) for n in ("a", "b", "c")]
    feats.append(Feature("d", "categorical", categories=("p", "q", "r"),
                         perturbation=perturbations.get("d")))
    return FeatureSpace(feats)


def grid_rows(space: FeatureSpace) -> pd.DataFrame:
    values = [range(7), range(7), range(7), ("p", "q", "r")]
    return pd.DataFrame(list(itertools.product(*values)), columns=space.names)


def trained(space: FeatureSpace, seed: int, family: str = "mlp"):
    rows = grid_rows(space)
    Z = space.transform(rows)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=Z.shape[1])
    y = (Z @ w + rng.normal(scale=0.3, size=len(Z)) > np.median(Z @ w)).astype(int)
    if family == "forest":
        model = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=seed)
        return model.fit(Z, y), rows
    return train_torch(Z, y, hidden=(8,), epochs=80, seed=seed), rows


def predict(model, space: FeatureSpace, rows: pd.DataFrame) -> np.ndarray:
    adapter = cfopt.models.parse_model(model)
    return np.asarray(adapter.predict(space.encode(rows)))


def l1(space: FeatureSpace, x: pd.Series, rows: pd.DataFrame) -> np.ndarray:
    """Weighted L1 with the default weights (1/spread; a category change costs 1)."""
    total = np.zeros(len(rows))
    for f in space:
        if f.is_onehot:
            total += (rows[f.name].to_numpy() != x[f.name]).astype(float)
        else:
            total += np.abs(rows[f.name].to_numpy(dtype=float) - x[f.name]) / f.weight_spread
    return total


def k_neighbours(space: FeatureSpace, x: pd.Series, z: pd.Series) -> pd.DataFrame:
    """Every point of the K-neighbourhood of z on the integer grid (brute force)."""
    axes = []
    for f in space:
        if x[f.name] != z[f.name] or f.perturbation is None:
            axes.append([z[f.name]])
        elif f.is_onehot:
            axes.append(list(P.switch_categories(f, z[f.name])))
        else:
            lo, hi = P.numeric_range(f, float(z[f.name]))
            axes.append(list(range(int(lo), int(hi) + 1)))
    return pd.DataFrame(list(itertools.product(*axes)), columns=space.names)


PERTURBED = {"a": Perturbation.absolute(increase=1, decrease=2),
             "b": Perturbation.relative(increase=0.5, decrease=0.5),
             "c": Perturbation.absolute(increase=2, decrease=0),
             "d": Perturbation.to_categories("p", "r")}


# ----------------------------------------------------------------------- annotations


def test_relative_perturbations_are_taken_at_the_counterfactual():
    f = Feature("v", "continuous", lower=0, upper=100,
                perturbation=Perturbation.relative(increase=0.1, decrease=0.2))
    # from x = 10 up to z = 50: the setback room is 20 % of 50 (not of 10), capped at 40
    assert P.setback_magnitude(f, 10.0, 50.0) == pytest.approx(10.0)
    # down from x = 50 to z = 10: 10 % of 10
    assert P.setback_magnitude(f, 50.0, 10.0) == pytest.approx(1.0)
    # the cap: the setback never goes past the factual
    assert P.setback_magnitude(f, 48.0, 50.0) == pytest.approx(2.0)
    assert P.numeric_range(f, 50.0) == (40.0, 55.0)


def test_relative_perturbations_of_negative_values_are_of_their_magnitude():
    """A relative perturbation moves a value by a fraction of |value|: at −50, 10 % up
    and 20 % down is [−60, −45], and the setback room of z = −50 is 10 (of 50)."""
    f = Feature("v", "continuous", lower=-100, upper=100,
                perturbation=Perturbation.relative(increase=0.1, decrease=0.2))
    assert P.numeric_range(f, -50.0) == (-60.0, -45.0)
    assert P.setback_magnitude(f, -80.0, -50.0) == pytest.approx(10.0)
    assert P.setback_magnitude(f, -10.0, -50.0) == pytest.approx(5.0)
    g = Feature("a", "integer", lower=-6, upper=6, perturbation=Perturbation.relative(0.5, 0.5))
    assert P.numeric_range(g, -3.0) == (-4.0, -2.0)  # ±1.5, rounded inwards


def test_the_k_adversary_perturbs_negative_values_by_their_magnitude():
    """logit = a + 2.5 on the integers −6..6: z = (a −2, b 1) is class 1, and 50 % of
    |−2| lets the world move a to −3 (class 0): not K-robust, with a = −3 the
    counterexample; from a = −1 (whose ±0.5 rounds inwards to −1 alone) it is."""
    import torch

    space = FeatureSpace([
        Feature("a", "integer", lower=-6, upper=6, shift=-6, scale=12, spread=12,
                perturbation=Perturbation.relative(increase=0.5, decrease=0.5)),
        Feature("b", "integer", lower=0, upper=6, shift=0, scale=6, spread=6)])
    net = torch.nn.Sequential(torch.nn.Linear(2, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[12.0, 0.0]]))  # the code of a is (a + 6) / 12
        net[0].bias.fill_(-3.5)
    explainer = cfopt.PerturbationRobustExplainer(net, space, robustness="none")
    for a, robust in ((-2, False), (-1, True)):
        x = pd.DataFrame({"a": [a], "b": [0]})
        verdict = explainer.certify(x, x.assign(b=1), 1)
        assert verdict.robust is robust, a
        if not robust:
            assert verdict.point["a"][0] == -3 and verdict.predicted == 0


def test_perturbation_validation():
    with pytest.raises(ValueError, match="magnitude >= 0"):
        Perturbation.absolute(increase=-1)
    with pytest.raises(ValueError, match="kind must be one of"):
        Perturbation("gaussian", 1, 1)
    with pytest.raises(ValueError, match="not among its categories"):
        Feature("d", "categorical", categories=("p", "q"),
                perturbation=Perturbation.to_categories("z"))
    with pytest.raises(ValueError, match="no numeric perturbation"):
        Feature("d", "categorical", categories=("p", "q"),
                perturbation=Perturbation.absolute(1, 1))
    with pytest.raises(ValueError, match="needs a categorical"):
        Feature("v", "continuous", lower=0, upper=1, perturbation=Perturbation.to_categories(0))


def test_feature_space_json_round_trip_keeps_perturbations():
    space = grid_space(PERTURBED)
    again = FeatureSpace.from_json(space.to_json())
    assert [f.perturbation for f in again] == [f.perturbation for f in space]


def _virgolin_home(tmp_path, monkeypatch, edit=None):
    src = cfopt.datasets.data_home() / "virgolin"
    if not (src / "annotations.json").exists():
        if IN_CI:
            raise FileNotFoundError(src / "annotations.json")
        pytest.skip("virgolin data not in CFOPT_DATA_HOME (set it to ../shared/data)")
    dst = tmp_path / "virgolin"
    shutil.copytree(src, dst)
    if edit is not None:
        data = json.loads((dst / "annotations.json").read_text())
        edit(data)
        (dst / "annotations.json").write_text(json.dumps(data))
    monkeypatch.setenv("CFOPT_DATA_HOME", str(tmp_path))
    return json.loads((dst / "annotations.json").read_text())


@pytest.mark.parametrize("name", cfopt.datasets.VIRGOLIN_DATASETS)
def test_loader_reproduces_every_annotation(name, tmp_path, monkeypatch):
    spec = _virgolin_home(tmp_path, monkeypatch)["datasets"][name]
    data = cfopt.datasets.load_virgolin(name, download=False)
    assert len(data.X) == spec["n_rows"]
    assert data.y.value_counts().to_dict() == {int(k): v for k, v in
                                                spec["label"]["class_counts"].items()}
    assert data.target_class == spec["label"]["best_class"]
    for f in spec["features"]:
        feature, p = data.space[f["name"]], f["perturbation"]
        coding = f.get("coding")
        label = (lambda c: c) if coding is None else (lambda c: coding[str(c)])
        if p is None:
            assert feature.perturbation is None
        elif "categories" in p:
            assert feature.perturbation == Perturbation.to_categories(
                *(label(c) for c in p["categories"]))
        else:
            assert feature.perturbation == Perturbation(p["type"], p["increase"], p["decrease"])
        if f["type"] == "numerical":
            assert (feature.lower, feature.upper) == tuple(map(float, f["interval"]))
        else:
            assert feature.categories == tuple(label(c) for c in f["interval"])
        assert data.plausibility[f["name"]] == f["plausibility"]
        if "perturbation_intended_but_dropped" in f:
            assert data.dropped[f["name"]] == f["perturbation_intended_but_dropped"]
    data.space.transform(data.X)  # every row lies in the annotated space
    constrained = data.space_with_plausibility()
    for f in spec["features"]:
        g = constrained[f["name"]]
        assert g.immutable == (f["plausibility"] == "=")
        assert g.direction == {">=": "increase", "<=": "decrease"}.get(f["plausibility"], "any")


def test_loader_reads_the_annotation_file_of_the_data_home(tmp_path, monkeypatch):
    def edit(data):
        age = data["datasets"]["adult"]["features"][0]
        assert age["name"] == "age"
        age["perturbation"] = {"type": "relative", "increase": 0.25, "decrease": 0.125}

    _virgolin_home(tmp_path, monkeypatch, edit)
    data = cfopt.datasets.load_virgolin("adult", download=False)
    assert data.space["age"].perturbation == Perturbation.relative(0.25, 0.125)
    with pytest.raises(ValueError, match="unknown annotated data set"):
        cfopt.datasets.load_virgolin("student", download=False)


def test_missing_annotations_say_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.setenv("CFOPT_DATA_HOME", str(tmp_path))
    with pytest.raises(cfopt.DataNotFoundError, match="annotations.json.*no public download"):
        cfopt.datasets.load_virgolin("adult")


# --------------------------------------------------------------------- C-robustness


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_setback_cost_optimum_equals_brute_force(seed):
    space = grid_space(PERTURBED)
    model, rows = trained(space, seed)
    labels = predict(model, space, rows)
    x = rows.iloc[[int(np.flatnonzero(labels == 0)[seed * 7])]]
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness="C", margin=1e-4)
    result = ex.explain(x, 1)
    assert result.certified and result.verified
    valid = rows[labels == 1]
    costs = l1(space, x.iloc[0], valid) + np.array(
        [P.setback_cost(space, ex.milp.weights, x, valid.iloc[[k]]) for k in range(len(valid))])
    assert result.objective == pytest.approx(costs.min(), abs=1e-6)
    z = result.counterfactual
    assert result.setback_cost == pytest.approx(P.setback_cost(space, ex.milp.weights, x, z))
    plain = cfopt.Explainer(model, space, margin=1e-4).explain(x, 1)
    assert result.objective >= plain.objective - 1e-9


def test_setback_point_and_cost_by_hand():
    space = grid_space(PERTURBED)
    x = pd.DataFrame([{"a": 1, "b": 4, "c": 3, "d": "q"}])
    z = pd.DataFrame([{"a": 5, "b": 2, "c": 6, "d": "p"}])
    back = P.max_setback(space, x, z).iloc[0]
    # a: up by 4, decrease room 2 -> 3; b: down to 2, relative increase 0.5*2 = 1 -> 3;
    # c: increase with no decrease room -> 6; d: p may switch to r (x's q is not allowed)
    assert back.to_dict() == {"a": 3, "b": 3, "c": 6, "d": "r"}
    w = {"a": 0.5, "b": 0.25, "c": 1.0, "d": 2.0}
    assert P.setback_cost(space, w, x, z) == pytest.approx(0.5 * 2 + 0.25 * 1 + 2.0)


# --------------------------------------------------------------------- K-robustness


def check_adversary(space, model, x, z):
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness="none")
    label = predict(model, space, z)[0]
    verdict = ex.certify(x, z, label)
    neigh = k_neighbours(space, x.iloc[0], z.iloc[0])
    flips = predict(model, space, neigh) != label
    if flips.any():
        assert verdict.robust is False, "the brute force finds a flipping K-neighbour"
        assert predict(model, space, verdict.point)[0] != label
        assert len(P.changed(space, z.iloc[0], verdict.point.iloc[0])) >= 1
        assert set(P.changed(space, z.iloc[0], verdict.point.iloc[0])).isdisjoint(
            P.changed(space, x.iloc[0], z.iloc[0]))
    else:
        assert verdict.robust is True
        assert verdict.bound > 0


@pytest.mark.parametrize("decrease,robust", [(2, False), (1, True)])
def test_a_k_neighbour_exactly_on_the_boundary_is_the_other_class(decrease, robust):
    """logit = a − 3 exactly (in float32 and float64): class 1 iff a > 3, so a = 3, on
    the boundary, is class 0. From a = 5, a decrease of 2 reaches it (no certificate: the
    proven bound is 0, not above the tolerance, and a = 3 is the counterexample); a
    decrease of 1 stops at logit 1 (certified)."""
    import torch

    space = grid_space({"a": Perturbation.absolute(increase=0, decrease=decrease)})
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, 1))
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].weight[0, 0] = 6.0  # the code of a is a / 6
        net[0].bias.fill_(-3.0)
    x = pd.DataFrame({"a": [5], "b": [0], "c": [0], "d": ["p"]})
    z = x.assign(b=1)  # a is kept, so the world may move it
    assert list(predict(net, space, pd.DataFrame({"a": [3, 4], "b": 1, "c": 0, "d": "p"}))) \
        == [0, 1]
    verdict = cfopt.PerturbationRobustExplainer(net, space, robustness="none").certify(x, z, 1)
    assert verdict.robust is robust
    if robust:
        assert verdict.bound == pytest.approx(1.0, abs=1e-6)
    else:
        assert verdict.bound == pytest.approx(0.0, abs=1e-6)
        assert verdict.point["a"][0] == 3 and verdict.predicted == 0


@settings(max_examples=12 if IN_CI else 25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), family=st.sampled_from(["mlp", "forest"]),
       changed=st.sets(st.sampled_from(["a", "b", "c", "d"]), max_size=2))
def test_k_adversary_matches_exhaustive_search(seed, family, changed):
    space = grid_space(PERTURBED)
    model, rows = trained(space, seed % 7, family)
    rng = np.random.default_rng(seed)
    x = rows.iloc[[int(rng.integers(len(rows)))]].reset_index(drop=True)
    z = x.copy()
    for n in sorted(changed):
        options = ["p", "q", "r"] if n == "d" else list(range(7))
        z.loc[0, n] = rng.choice([v for v in options if v != x.loc[0, n]])
    check_adversary(space, model, x, z)


def cheapest_k_robust(model, space: FeatureSpace, rows: pd.DataFrame, labels: np.ndarray,
                      x: pd.DataFrame, extra=lambda z: 0.0) -> float:
    """Brute force: the cheapest grid point of class 1 whose whole K-neighbourhood the
    model puts in class 1 (integer moves are >= min_change), at the weighted L1 cost plus
    ``extra(z)``; ``inf`` when there is none."""
    best = np.inf
    for k in np.flatnonzero(labels == 1):
        z = rows.iloc[[k]].reset_index(drop=True)
        if (predict(model, space, k_neighbours(space, x.iloc[0], z.iloc[0])) == 1).all():
            best = min(best, l1(space, x.iloc[0], z)[0] + extra(z))
    return best


@pytest.mark.parametrize("family,robustness", [("mlp", "K"), ("forest", "K"), ("mlp", "CK")])
def test_k_robust_loop_is_certified_and_optimal(family, robustness):
    space = grid_space(PERTURBED)
    model, rows = trained(space, 3, family)
    labels = predict(model, space, rows)
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness=robustness, margin=1e-4)
    done = 0
    for i in np.flatnonzero(labels == 0)[::97][:3]:
        x = rows.iloc[[i]].reset_index(drop=True)
        result = ex.explain(x, 1)
        best = cheapest_k_robust(model, space, rows, labels, x, lambda z: P.setback_cost(
            space, ex.milp.weights, x, z) if "C" in robustness else 0.0)
        if not np.isfinite(best):
            assert result.status is cfopt.RobustStatus.INFEASIBLE
            continue
        assert result.certified, result.message
        assert result.optimal
        z = result.counterfactual
        neigh = k_neighbours(space, x.iloc[0], z.iloc[0])
        assert (predict(model, space, neigh) == 1).all()
        assert result.objective == pytest.approx(best, abs=1e-6)
        assert result.iterations == len(result.scenarios) + 1
        done += 1
    assert done >= 1


def three_class_mlp() -> tuple[FeatureSpace, pd.DataFrame, MLPClassifier, np.ndarray]:
    """The grid space, its rows, an sklearn MLP of three classes on it and its labels."""
    space = grid_space(PERTURBED)
    rows = grid_rows(space)
    Z = space.transform(rows)
    y = np.digitize(Z[:, 0] + Z[:, 1] - Z[:, 2], [-0.2, 0.5])
    model = MLPClassifier(hidden_layer_sizes=(8,), max_iter=2000, random_state=0).fit(Z, y)
    return space, rows, model, model.predict(Z)


def test_multiclass_k_robust_counterfactual_is_certified():
    space, rows, model, labels = three_class_mlp()
    x = rows.iloc[[int(np.flatnonzero(labels == 0)[5])]].reset_index(drop=True)
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness="K")
    result = ex.explain(x, 2)
    assert result.certified
    neigh = k_neighbours(space, x.iloc[0], result.counterfactual.iloc[0])
    assert (model.predict(space.transform(neigh)) == 2).all()


def test_the_k_adversary_tries_the_strongest_other_class_first(monkeypatch):
    """3 classes: a check minimises the target's margin against the class the model
    scores highest after the target first, and a refuting check stops there (one MILP);
    the verdict is the one with the other order."""
    space, rows, model, labels = three_class_mlp()
    probabilities = model.predict_proba(space.transform(rows))
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness="K")
    adversary = ex.adversary
    solves = []
    solve = adversary.backend.solve
    monkeypatch.setattr(adversary.backend, "solve",
                        lambda *a, **k: solves.append(1) or solve(*a, **k))
    refuted = 0
    for i in np.flatnonzero(labels == 1)[:40]:
        z = rows.iloc[[i]].reset_index(drop=True)
        x = z.copy()
        x.loc[0, "a"] = (z.loc[0, "a"] + 1) % 7  # z changes a, keeps the rest
        strongest = 0 if probabilities[i, 0] > probabilities[i, 2] else 2
        (first, _) = adversary._pairs(1, space.encode(z)[0])
        assert first == {1: 1.0, strongest: -1.0}
        solves.clear()
        verdict = adversary.check(x, z, 1)
        if verdict.robust is False and verdict.predicted == strongest:
            assert len(solves) == 1
            refuted += 1
        monkeypatch.setattr(adversary, "_pairs", lambda t, z=None, order=adversary._pairs:
                            order(t, z)[::-1])
        assert adversary.check(x, z, 1).robust == verdict.robust
        monkeypatch.undo()
        monkeypatch.setattr(adversary.backend, "solve",
                            lambda *a, **k: solves.append(1) or solve(*a, **k))
    assert refuted >= 1


def test_immutable_features_stay_and_perturbations_still_apply():
    space = grid_space(PERTURBED).immutable("c")
    model, rows = trained(space, 4)
    labels = predict(model, space, rows)
    x = rows.iloc[[int(np.flatnonzero(labels == 0)[11])]].reset_index(drop=True)
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness="CK")
    result = ex.explain(x, 1)
    if result.found:
        assert result.counterfactual.loc[0, "c"] == x.loc[0, "c"]
        neigh = k_neighbours(space, x.iloc[0], result.counterfactual.iloc[0])
        assert (predict(model, space, neigh) == 1).all() == result.certified


def test_bad_options_are_named():
    space = grid_space(PERTURBED)
    model, rows = trained(space, 0)
    with pytest.raises(ValueError, match="robustness must be one of"):
        cfopt.PerturbationRobustExplainer(model, space, robustness="KC")
    with pytest.raises(ValueError, match="max_iterations"):
        cfopt.PerturbationRobustExplainer(model, space, max_iterations=0)
    with pytest.raises(ValueError, match="min_change"):
        cfopt.PerturbationRobustExplainer(model, space, min_change=0)
    for bad in (float("nan"), 0, -1e-6, float("inf"), "1e-6"):
        with pytest.raises(ValueError, match="tolerance must be a positive number"):
            cfopt.PerturbationRobustExplainer(model, space, tolerance=bad)
    with pytest.raises(TypeError, match="unknown option"):
        cfopt.PerturbationRobustExplainer(model, space).explain(rows.iloc[[0]], 1, foo=1)


# ------------------------------------------------------------------ evaluation metrics


def test_evaluation_metrics_by_hand():
    space = grid_space(PERTURBED)  # spreads 6, 6, 6; d = 4 features
    x = pd.DataFrame([{"a": 0, "b": 0, "c": 0, "d": "p"}])
    z = pd.DataFrame([{"a": 3, "b": 0, "c": 0, "d": "q"}])
    # Gower = (3/6 + 1) / 4, L0 / d = 2 / 4
    assert cfopt.metrics.cogs_loss(space, x, z)[0] == pytest.approx(0.5 * 1.5 / 4 + 0.5 * 0.5)
    perturbed = pd.DataFrame([{"a": 2, "b": 0, "c": 0, "d": "q"},
                              {"a": 3, "b": 1, "c": 0, "d": "q"}])
    assert cfopt.metrics.invalidity(["no", "yes"], "yes") == 0.5
    rel = cfopt.metrics.relative_cost(space, x, z, perturbed, ["no", "yes"], "yes", ideal=0.25)
    base = 0.5 * 1.5 / 4 + 0.25
    back = 0.5 * (1 / 6) / 4 + 0.5 / 4
    assert rel == pytest.approx([(base + back) / 0.25, base / 0.25])
    fix = cfopt.metrics.fixable(space, perturbed, z, {"a": ">=", "b": "=", "c": None, "d": None})
    assert fix.tolist() == [True, False]
    assert cfopt.metrics.sparsity_loss(space, x, perturbed.iloc[[1]], z) == 1


def test_sampled_perturbations_stay_in_their_boxes():
    space = grid_space(PERTURBED)
    x = pd.DataFrame([{"a": 2, "b": 4, "c": 3, "d": "q"}])
    z = pd.DataFrame([{"a": 5, "b": 4, "c": 3, "d": "q"}])
    for on in ("C", "K", "CK"):
        s = P.sample_perturbations(space, x, z, 200, on, rng=0)
        moved_a, moved_kept = s["a"] != 5, (s[["b", "c", "d"]] != z[["b", "c", "d"]].iloc[0])
        assert moved_a.any() == ("C" in on) and moved_kept.any().any() == ("K" in on)
        assert s["a"].between(3, 6).all() and s["b"].between(2, 6).all()
        assert s["c"].between(3, 5).all() and set(s["d"]) <= {"q", "p", "r"}
    k = P.sample_k_neighbourhood(space, x, z, 200, rng=1)
    assert (k["a"] == 5).all() and set(k["d"]) == {"q", "p", "r"}
