"""Composing on cfopt's formulation (:mod:`cfopt.constraints.composition`): declared
blocks added and removed by name, their costs in the objective, the user's own term kept
beside them, the cutoff row following the objective, and which components are cfopt's."""

from __future__ import annotations

import pandas as pd
import pyomo.environ as pyo
import pytest
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr
from pyomo.repn.standard_repn import generate_standard_repn
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.constraints.blocks import ConstraintBlock

FRAME = pd.DataFrame({"a": [0.0, 1, 2, 3, 4, 5], "k": [0, 1, 2, 3, 1, 2],
                      "c": ["p", "q", "p", "q", "p", "q"]})
SPACE = cfopt.FeatureSpace.from_frame(FRAME)
MODEL = LogisticRegression().fit(SPACE.transform(FRAME), [0, 0, 0, 1, 1, 1])


def model():
    return cfopt.Explainer(MODEL, SPACE).milp


class Costly(ConstraintBlock):
    """A block with a variable of its own in [0, 2] costing ``weight`` per unit, at
    least ``floor``; counts its builds and updates."""

    kind = "costly"

    def __init__(self, name=None, weight=3.0, floor=0.0, feature="a"):
        super().__init__(name)
        self.weight, self.floor, self.feature = weight, floor, feature
        self.built = self.updated = 0
        self.seen = []  # (hook, model, block) of every call

    def saw(self, hook, m, block):
        assert isinstance(m, cfopt.CounterfactualModel), f"{hook} got {m!r} for the model"
        assert isinstance(block, pyo.Block) and block is m.component(self.name), \
            f"{hook} got {block!r} for its block"
        self.seen.append(hook)

    def validate(self, space):
        if self.feature not in space.names:
            raise ValueError(f"costly: unknown feature {self.feature!r}")

    def build(self, m, block):
        self.saw("build", m, block)
        self.built += 1
        block.u = pyo.Var(bounds=(0.0, 2.0))
        block.floor = pyo.Constraint(expr=block.u >= self.floor)

    def update(self, m, block):
        self.saw("update", m, block)
        self.updated += 1

    def objective_term(self, m, block):
        self.saw("objective_term", m, block)
        return self.weight * block.u if self.weight else None

    def violations(self, m, factual, row):
        return []


def upper(expr):
    return compute_bounds_on_expr(expr)[1]


def test_the_objective_is_the_distance_with_its_cutoff_above_its_bound():
    m = model()
    assert m.objective.sense == pyo.minimize
    assert m.objective.expr is m.composed_objective
    top = upper(m.composed_objective)
    assert m.max_objective == pytest.approx(top + 1.0)
    assert pyo.value(m.cutoff) == m.max_objective
    assert m.objective_cutoff.upper is m.cutoff or \
        pyo.value(m.objective_cutoff.upper) == m.max_objective
    assert m.constraints == {}
    assert m.raw.constraints == [] and m.raw.term is None


def test_a_declared_block_gets_a_fresh_name_and_its_cost_joins_the_objective():
    m = model()
    distance_top = upper(m.composed_objective)
    m.costly_1 = pyo.Block()  # taken: the next free name is costly_2
    first = Costly()
    block = m.add_constraint(first)
    assert first.name == "costly_2" and m.costly_2 is block
    assert first.built == 1 and first.updated == 0  # no factual yet
    assert list(m.constraints) == ["costly_2"]
    assert m.constraints["costly_2"] is first
    second = m.add_constraint(Costly())
    assert second.name == "costly_3"
    assert upper(m.composed_objective) == pytest.approx(distance_top + 12.0)
    assert m.objective.expr is m.composed_objective
    assert m.max_objective == pytest.approx(distance_top + 13.0)
    assert pyo.value(m.cutoff) == pytest.approx(distance_top + 13.0)
    assert len(m.declared_costs()) == 2
    assert m.is_own_component("costly_2")
    assert not m.is_own_component("costly_1")
    assert m.raw.names == []  # declared blocks are not raw components


def test_a_block_added_after_the_factual_and_target_is_updated_at_once():
    m = model()
    m.set_factual(FRAME.iloc[[0]])
    block = Costly("early")
    m.add_constraint(block)
    assert block.updated == 0  # the factual alone: no target yet
    m.set_target(1)
    assert block.updated == 1
    late = Costly("late")
    m.add_constraint(late)
    assert late.updated == 1


def test_a_block_without_cost_leaves_the_objective_alone():
    m = model()
    before = upper(m.composed_objective)
    m.add_constraint(Costly("free", weight=0.0))
    assert m.declared_costs() == []
    assert upper(m.composed_objective) == pytest.approx(before)


def test_a_taken_name_and_a_non_block_are_refused():
    m = model()
    with pytest.raises(TypeError, match="constraints must be cfopt constraint blocks.*got str"):
        m.add_constraint("a <= 3")
    with pytest.raises(ValueError, match="a component named 'x' already exists in the model"):
        m.add_constraint(Costly("x"))
    m.add_constraint(Costly("mine"))
    with pytest.raises(ValueError, match="a component named 'mine' already exists"):
        m.add_constraint(Costly("mine"))
    with pytest.raises(ValueError, match="costly: unknown feature 'zz'"):
        m.add_constraint(Costly("other", feature="zz"))
    assert m.component("other") is None and list(m.constraints) == ["mine"]


def test_removing_a_block_takes_its_cost_out():
    m = model()
    top = upper(m.composed_objective)
    first, second = Costly("one"), Costly("two", weight=1.0)
    m.add_constraint(first)
    m.add_constraint(second)
    assert m.remove_constraint("one") is first
    assert m.component("one") is None and list(m.constraints) == ["two"]
    assert upper(m.composed_objective) == pytest.approx(top + 2.0)
    assert not m.is_own_component("one")
    with pytest.raises(KeyError, match=r"no declared constraint named 'one'; the model "
                                       r"has \['two'\]"):
        m.remove_constraint("one")


def test_the_users_term_is_kept_when_blocks_change_and_the_cutoff_follows_it():
    m = model()
    distance_top = upper(m.composed_objective)
    m.objective.set_value(m.objective.expr + 4 * m.x["a"])  # a in [0, 5]: up to 20
    raw = m.raw
    assert raw.term is not None
    assert m.max_objective == pytest.approx(distance_top + 21.0)
    assert pyo.value(m.cutoff) == pytest.approx(distance_top + 21.0)
    assert pyo.value(m.objective_cutoff.upper) == pytest.approx(distance_top + 21.0)
    m.add_constraint(Costly("block", weight=1.0))
    assert m.objective.expr is not m.composed_objective
    assert coefficients(m.objective.expr) == {
        "dev[a]": 1.0, "dev[k]": 1.0, "dev[c]": 1.0, "x_steps[a]": 4.0, "block.u": 1.0}
    assert coefficients(m.composed_objective) == {
        "dev[a]": 1.0, "dev[k]": 1.0, "dev[c]": 1.0, "block.u": 1.0}
    assert m.max_objective == pytest.approx(upper(m.objective.expr) + 1.0)
    assert pyo.value(m.cutoff) == m.max_objective
    m.remove_constraint("block")
    assert coefficients(m.objective.expr) == {
        "dev[a]": 1.0, "dev[k]": 1.0, "dev[c]": 1.0, "x_steps[a]": 4.0}
    assert m.max_objective == pytest.approx(upper(m.objective.expr) + 1.0)


def coefficients(expr):
    repn = generate_standard_repn(expr, compute_values=True)
    out = {}
    for a, v in zip(repn.linear_coefs, repn.linear_vars):
        out[v.name] = out.get(v.name, 0.0) + float(a)
    return {k: v for k, v in out.items() if v != 0}


def test_an_unbounded_users_term_leaves_the_cutoff_on_cfopts_objective():
    m = model()
    distance_top = upper(m.composed_objective)
    m.free = pyo.Var()
    m.objective.set_value(m.objective.expr + m.free)
    m.refresh_raw()
    assert m.max_objective == pytest.approx(distance_top + 1.0)
    body = m.objective_cutoff.body
    assert upper(body) == pytest.approx(distance_top)


def test_raw_is_read_anew_when_a_component_is_added_or_removed():
    m = model()
    assert m.raw.names == []
    m.no_rise = pyo.Constraint(expr=m.x["a"] <= m.x0["a"])
    assert m.raw.names == ["no_rise"]
    m.no_rise.deactivate()
    assert m.raw.names == []
    assert m.user_components() == []
    m.no_rise.activate()
    assert [c.local_name for c in m.user_components()] == ["no_rise"]
    m.del_component("no_rise")
    assert m.raw.names == []


def test_adopted_components_are_cfopts_own():
    m = model()
    m.shifted = pyo.Constraint(expr=m.x["a"] >= 1)
    m.other = pyo.Block()
    assert not m.is_own_component("shifted")
    m.adopt("shifted", "other")
    assert m.is_own_component("shifted") and m.is_own_component("other")
    assert m.is_own_component("objective") and m.is_own_component("x")
    assert not m.is_own_component("nothing")
    assert m.user_components() == []
    assert m.raw.names == []
    mine = m.add_constraint(Costly("mine"))
    assert m.user_components() == [mine]


def test_the_hooks_get_the_model_and_the_blocks_own_block():
    m = model()
    m.set_factual(FRAME.iloc[[0]])
    m.set_target(1)
    block = Costly()
    m.add_constraint(block)
    assert block.name == "costly_1"
    assert block.seen[:3] == ["build", "update", "objective_term"]


def test_raw_follows_a_changed_objective_and_a_replaced_component():
    m = model()
    assert m.raw.term is None
    m.objective.set_value(m.objective.expr + 2 * m.x["a"])
    assert m.raw.term is not None
    m.one = pyo.Constraint(expr=m.x["a"] <= 4)
    assert m.raw.names == ["one"]
    m.del_component("one")
    m.two = pyo.Constraint(expr=m.x["a"] <= 3)
    assert m.raw.names == ["two"]


def test_a_lowered_cutoff_stays_until_the_objective_or_the_factual_changes():
    m = model()
    top = m.max_objective
    m.set_factual(FRAME.iloc[[0]])
    m.set_target(1)
    m.cutoff = 1.25  # as a diverse set's epsilon window lowers it
    m.refresh_raw()
    m.set_target(1)
    assert pyo.value(m.cutoff) == 1.25 and m.max_objective == top
    m.set_factual(FRAME.iloc[[1]])  # another query: the window was the last one's
    assert pyo.value(m.cutoff) == m.max_objective == top
    m.cutoff = 1.25
    m.objective.set_value(m.objective.expr + m.x["a"])
    m.refresh_raw()
    assert m.max_objective == pytest.approx(top + 5.0)
    assert pyo.value(m.cutoff) == m.max_objective
    m.cutoff = 1.5
    m.refresh_raw()
    assert pyo.value(m.cutoff) == 1.5


def test_a_top_level_component_named_as_a_nested_one_of_cfopts_is_the_users():
    m = model()
    nested = {c.local_name for c in m.predictor.component_objects(descend_into=True)}
    name = sorted(nested - {c.local_name for c in m.component_objects(descend_into=False)})[0]
    m.add_component(name, pyo.Constraint(expr=m.x["a"] <= 4))
    assert not m.is_own_component(name)
    assert m.raw.names == [name]


def test_the_cutoff_bounds_a_term_that_reads_the_factual_at_each_factual():
    """A reward for changing c (``-2 category_changed[c]``, which reads the factual's
    level) beside the L∞ distance: its range depends on the factual. Bounded before any
    factual, the cutoff was 1 - 2 + 1 = 0 and cut every counterfactual of an immutable
    c (differential seed 140953: a false 'infeasible'); at each factual it is 2, and
    the answer is the distance's optimum, equal to brute force over the grid."""
    frame = FRAME.assign(c=["p", "q", "r", "q", "p", "r"])  # one-hot: category_changed
    space = cfopt.FeatureSpace.from_frame(frame).immutable("c")
    model = LogisticRegression().fit(space.transform(frame), [0, 0, 0, 1, 1, 1])
    reward = cfopt.CustomConstraint(cost=lambda m, b: -2.0 * m.category_changed["c"],
                                    name="reward")
    explainer = cfopt.Explainer(model, space, objective="linf", constraints=[reward],
                                mip_gap=0.0)
    m = explainer.milp
    grid = pd.DataFrame([{"a": a, "k": k, "c": c} for a in range(6) for k in range(4)
                         for c in "pqr"])
    for i in (0, 1, 2):
        x = frame.iloc[[i]]
        ce = explainer.explain(x, target=1)
        assert m.max_objective == pytest.approx(1.0 + 0.0 + 1.0)
        valid = grid[(grid["c"] == x["c"].iloc[0]) & (model.predict(space.transform(grid)) == 1)]
        logits = m.adapter.structure.logits(space.transform(valid))[:, 0]
        valid = valid[logits >= m.declared_margin]
        best = min(m.distances(valid.iloc[[k]].reset_index(drop=True))["linf"]
                   for k in range(len(valid)))
        assert ce.status is cfopt.Status.OPTIMAL
        assert ce.objective == pytest.approx(best, rel=1e-6, abs=1e-9)
