"""cfopt: counterfactual explanations by mixed-integer optimization on Pyomo.

Quick start::

    import cfopt
    data = cfopt.datasets.load_german()
    space = cfopt.FeatureSpace.from_frame(data.X)
    # train any supported model on space.transform(data.X), then
    explainer = cfopt.Explainer(model, space)
    ce = explainer.explain(data.X.iloc[[0]])
    print(ce.changes())

The names below are the product's front. The parts a researcher composes a new
formulation or method from live in the subpackages: :mod:`cfopt.space` (features),
:mod:`cfopt.models` (parsers), :mod:`cfopt.formulations` (the MILP's pieces),
:mod:`cfopt.constraints` (declared constraints), :mod:`cfopt.query` (answering one
query), :mod:`cfopt.methods` (robust methods and their cutting-set engine),
:mod:`cfopt.results`, :mod:`cfopt.solvers`, :mod:`cfopt.baselines`, :mod:`cfopt.errors`.
"""

from . import datasets, metrics
from .baselines import MDPSO, CoGS, DiverseNeighbours
from .batch.runner import BatchResult
from .constraints import (
    CausalModel,
    ClusterHulls,
    ConstraintBlock,
    ConvexHull,
    CustomConstraint,
    IfCategory,
    IfIncreases,
    IsolationForestScore,
    LinearConstraint,
    NearestNeighbourHull,
    Step,
    StructuralEquation,
)
from .errors import (
    CfoptError,
    DataNotFoundError,
    InfeasibleError,
    SolverLicenseError,
    SolverNotAvailableError,
    UnsupportedModelError,
)
from .explainer import Explainer
from .methods import (
    MILPR,
    RNCE,
    CombinedRobustExplainer,
    NonRobustMILP,
    PerturbationRobustExplainer,
    Proplace,
)
from .methods.adversaries import RobustnessChecker
from .problem import CounterfactualModel, build
from .results.counterfactual import Counterfactual, CounterfactualSet
from .results.robust import (
    PerturbationRobustCounterfactual,
    RobustCounterfactual,
    RobustnessCertificate,
    RobustStatus,
)
from .results.status import Status
from .space import Feature, FeatureSpace, Kind, Perturbation

__version__ = "0.1.0"

__all__ = [
    # the explainer, its feature space and its answers
    "Explainer", "FeatureSpace", "Feature", "Kind", "Perturbation", "Counterfactual",
    "CounterfactualSet", "BatchResult", "Status", "datasets", "metrics",
    # composing the problem and declaring constraints
    "build", "CounterfactualModel", "ConstraintBlock", "CustomConstraint", "LinearConstraint",
    "IfCategory",
    "IfIncreases", "Step", "CausalModel", "StructuralEquation", "ConvexHull",
    "NearestNeighbourHull", "ClusterHulls", "IsolationForestScore",
    # robust methods and their answers
    "Proplace", "MILPR", "NonRobustMILP", "RNCE", "PerturbationRobustExplainer",
    "CombinedRobustExplainer",
    "RobustnessChecker", "RobustCounterfactual", "PerturbationRobustCounterfactual",
    "RobustnessCertificate", "RobustStatus",
    # model-agnostic baselines
    "CoGS", "MDPSO", "DiverseNeighbours",
    # errors a user catches (the rest: cfopt.errors)
    "CfoptError", "InfeasibleError", "UnsupportedModelError", "SolverNotAvailableError",
    "SolverLicenseError", "DataNotFoundError",
]
