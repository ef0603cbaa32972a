"""The packages' public names (the ``__init__`` files of :mod:`cfopt.query`,
:mod:`cfopt.query.restrictions`, :mod:`cfopt.formulations`,
:mod:`cfopt.formulations.predictors`, :mod:`cfopt.solvers`, :mod:`cfopt.solvers.cpsat`,
:mod:`cfopt.methods`, :mod:`cfopt.methods.adversaries`, :mod:`cfopt.models`,
:mod:`cfopt.constraints`, :mod:`cfopt.space`):
each ``__all__`` name is the object of its defining module, and importing a package
registers its formulations and restrictions."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "cfopt.constraints": {
        **dict.fromkeys(("CausalModel", "StructuralEquation"), "cfopt.constraints.causal"),
        **dict.fromkeys(("ClusterHulls", "ConvexHull", "NearestNeighbourHull"),
                        "cfopt.constraints.trust_regions"),
        **dict.fromkeys(("IfCategory", "IfIncreases", "LinearConstraint", "Step"),
                        "cfopt.constraints.rules"),
        "ConstraintBlock": "cfopt.constraints.blocks",
        "CustomConstraint": "cfopt.constraints.custom",
        "DiversityCuts": "cfopt.constraints.diversity_cuts",
        "IsolationForestScore": "cfopt.constraints.isolation",
        "KScenarios": "cfopt.constraints.scenarios",
        "SetbackCost": "cfopt.constraints.setback"},
    "cfopt.space": {
        "Feature": "cfopt.space.feature", "Kind": "cfopt.space.feature",
        "Perturbation": "cfopt.space.feature", "FeatureSpace": "cfopt.space.space",
        "as_frame": "cfopt.space.validate"},
    "cfopt.models": {
        "DenseLayer": "cfopt.models.network",
        "ModelAdapter": "cfopt.models.base",
        "ReLUNetwork": "cfopt.models.network",
        "decide": "cfopt.models.base",
        "parse_model": "cfopt.models.registry",
        "register_model": "cfopt.models.registry",
        "supported_models": "cfopt.models.registry"},
    "cfopt.query.restrictions": {
        "Restricted": "cfopt.query.restrictions.registry",
        "Restriction": "cfopt.query.restrictions.registry",
        "register_restriction": "cfopt.query.restrictions.registry",
        "restriction_of": "cfopt.query.restrictions.registry"},
    "cfopt.formulations": {
        "add_predictor": "cfopt.formulations.predictors.base",
        "PredictorConstr": "cfopt.formulations.predictors.base",
        "register_formulation": "cfopt.formulations.predictors.base"},
    "cfopt.formulations.predictors": {
        "NetworkCopy": "cfopt.formulations.predictors.base",
        "NetworkPredictorConstr": "cfopt.formulations.predictors.network",
        "PredictorConstr": "cfopt.formulations.predictors.base",
        "TreePredictorConstr": "cfopt.formulations.predictors.trees",
        "add_predictor": "cfopt.formulations.predictors.base",
        "register_formulation": "cfopt.formulations.predictors.base"},
    "cfopt.solvers": {
        "GurobiBackend": "cfopt.solvers.backends", "HighsBackend": "cfopt.solvers.backends",
        "LegacyBackend": "cfopt.solvers.backends", "make_solver": "cfopt.solvers.backends",
        "SolveOutcome": "cfopt.solvers.base", "SolverBackend": "cfopt.solvers.base",
        "SolverSettings": "cfopt.solvers.base"},
    "cfopt.methods": {
        "Adversary": "cfopt.methods.cutting_set", "Check": "cfopt.methods.cutting_set",
        "CombinedRobustExplainer": "cfopt.methods.combined",
        "CuttingSet": "cfopt.methods.cutting_set", "Deadline": "cfopt.methods.cutting_set",
        "KAdversary": "cfopt.methods.adversaries.k_neighbourhood",
        "LoopResult": "cfopt.methods.cutting_set", "Master": "cfopt.methods.cutting_set",
        "MasterAnswer": "cfopt.methods.cutting_set", "MILPR": "cfopt.methods.milp_r",
        "NonRobustMILP": "cfopt.methods.milp_r",
        "PerturbationRobustExplainer": "cfopt.methods.k_robust",
        "Proplace": "cfopt.methods.proplace", "RNCE": "cfopt.methods.rnce",
        "RobustnessChecker": "cfopt.methods.adversaries.model_shift",
        "RobustPlausibleRegion": "cfopt.methods.plausible_region"},
    "cfopt.methods.adversaries": {
        "KAdversary": "cfopt.methods.adversaries.k_neighbourhood",
        "KNeighbourhoodAdversary": "cfopt.methods.adversaries.k_neighbourhood",
        "ModelShiftAdversary": "cfopt.methods.adversaries.model_shift",
        "RegionReport": "cfopt.methods.adversaries.model_shift",
        "RobustnessChecker": "cfopt.methods.adversaries.model_shift"},
    "cfopt.solvers.cpsat": {
        "INSTALL_HINT": "cfopt.solvers.cpsat.backend",
        "CpSatBackend": "cfopt.solvers.cpsat.backend",
        "check_supported": "cfopt.solvers.cpsat.backend"},
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_each_public_name_is_its_modules_own(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    for name, home in PUBLIC[package].items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name)


def test_importing_the_packages_registers_their_kinds():
    from cfopt.formulations.predictors import NetworkPredictorConstr, TreePredictorConstr
    from cfopt.formulations.predictors.base import _FORMULATIONS
    from cfopt.models.network import ReLUNetwork
    from cfopt.models.trees import TreeEnsemble
    from cfopt.query.restrictions import registry
    from cfopt.query.restrictions.relu import ReluRestriction
    from cfopt.query.restrictions.trees import TreeRestriction

    assert isinstance(registry.RESTRICTIONS[NetworkPredictorConstr], ReluRestriction)
    assert isinstance(registry.RESTRICTIONS[TreePredictorConstr], TreeRestriction)
    assert ReLUNetwork in _FORMULATIONS and TreeEnsemble in _FORMULATIONS


def test_the_query_package_documents_its_modules():
    query = importlib.import_module("cfopt.query")
    for name in ("runner", "solution", "claims", "diagnosis", "diverse", "restrictions"):
        assert f":mod:`.{name}`" in query.__doc__
        importlib.import_module(f"cfopt.query.{name}")
