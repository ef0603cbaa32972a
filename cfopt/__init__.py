"""cfopt: counterfactual explanations by mixed-integer optimization on Pyomo.

Quick start::

    import cfopt
    data = cfopt.datasets.load_german()
    space = cfopt.FeatureSpace.from_frame(data.X)
    # train any supported model on space.transform(data.X), then
    explainer = cfopt.Explainer(model, space)
    ce = explainer.explain(data.X.iloc[[0]])
    print(ce.changes())
"""

from . import datasets, diversity, metrics, perturbations
from .baselines import MDPSO, CoGS, DiverseNeighbours, DiverseNeighboursResult
from .batch import BatchResult
from .bound_tightening import BoundTighteningReport, tighten_relu_bounds
from .diagnosis import Diagnosis, diagnose
from .errors import (
                     AlreadyTargetError,
                     CfoptError,
                     DataNotFoundError,
                     InfeasibleError,
                     ModelChangedError,
                     SolverError,
                     SolverLicenseError,
                     SolverNotAvailableError,
                     UnsupportedModelError,
)
from .explainer import Explainer
from .features import Feature, FeatureSpace, Kind, Perturbation
from .formulations import (
    CausalModel,
    ClusterHulls,
    ConstraintBlock,
    ConvexHull,
    DiversityCuts,
    IfCategory,
    IfIncreases,
    IsolationForestScore,
    KScenarios,
    LinearConstraint,
    NearestNeighbourHull,
    PredictorConstr,
    SetbackCost,
    Step,
    StructuralEquation,
    add_predictor,
    register_formulation,
)
from .methods import (
    MILPR,
    RNCE,
    KAdversary,
    KVerdict,
    NonRobustMILP,
    PerturbationRobustCounterfactual,
    PerturbationRobustExplainer,
    Proplace,
    RobustCounterfactual,
    RobustnessCertificate,
    RobustnessChecker,
    RobustnessVerdict,
    RobustPlausibleRegion,
    RobustStatus,
)
from .models import ModelAdapter, parse_model, register_model, supported_models
from .problem import CounterfactualModel, build
from .results import Counterfactual, CounterfactualSet
from .solvers import SolverBackend, SolverSettings, make_solver
from .status import Status

__version__ = "0.1.0"

__all__ = [
    "add_predictor", "AlreadyTargetError", "BoundTighteningReport", "build", "CausalModel",
    "CfoptError",
    "ClusterHulls", "ConstraintBlock", "ConvexHull", "Counterfactual", "CounterfactualModel",
    "CounterfactualSet", "DataNotFoundError", "datasets", "diagnose", "Diagnosis",
    "DiverseNeighbours", "DiverseNeighboursResult", "diversity", "DiversityCuts", "Explainer",
    "Feature", "FeatureSpace", "IfCategory", "IfIncreases", "InfeasibleError", "Kind",
    "LinearConstraint", "make_solver", "metrics", "ModelAdapter", "ModelChangedError",
    "NearestNeighbourHull",
    "parse_model", "PredictorConstr", "register_formulation", "register_model",
    "SolverBackend", "SolverError", "SolverLicenseError", "SolverNotAvailableError",
    "SolverSettings", "Status", "Step", "StructuralEquation", "supported_models",
    "tighten_relu_bounds", "UnsupportedModelError", "__version__",
]
__all__ += ["CoGS", "MDPSO"]
__all__ += ["MILPR", "NonRobustMILP", "Proplace", "RNCE", "RobustCounterfactual",
            "RobustPlausibleRegion", "RobustStatus", "RobustnessCertificate",
            "RobustnessChecker", "RobustnessVerdict"]
__all__ += ["KAdversary", "KScenarios", "KVerdict", "Perturbation",
            "PerturbationRobustCounterfactual", "PerturbationRobustExplainer", "perturbations",
            "SetbackCost"]
__all__ += ["BatchResult"]
__all__ += ["IsolationForestScore"]
