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

from . import datasets, metrics
from .baselines import DiverseNeighbours, DiverseNeighboursResult
from .bound_tightening import BoundTighteningReport, tighten_relu_bounds
from .diagnosis import Diagnosis, diagnose
from .errors import (
                     CfoptError,
                     DataNotFoundError,
                     InfeasibleError,
                     SolverError,
                     SolverLicenseError,
                     SolverNotAvailableError,
                     UnsupportedModelError,
)
from .explainer import Explainer
from .features import Feature, FeatureSpace, Kind
from .formulations import (
    CausalModel,
    ClusterHulls,
    ConstraintBlock,
    ConvexHull,
    IfCategory,
    IfIncreases,
    LinearConstraint,
    NearestNeighbourHull,
    PredictorConstr,
    Step,
    StructuralEquation,
    add_predictor,
    register_formulation,
)
from .models import ModelAdapter, parse_model, register_model, supported_models
from .problem import CounterfactualModel, build
from .results import Counterfactual
from .solvers import SolverBackend, SolverSettings, make_solver
from .status import Status

__version__ = "0.1.0"

__all__ = [
    "BoundTighteningReport", "CausalModel", "CfoptError", "ClusterHulls", "ConstraintBlock",
    "ConvexHull", "Counterfactual", "CounterfactualModel", "DataNotFoundError", "Diagnosis",
    "Explainer", "Feature", "FeatureSpace", "IfCategory", "IfIncreases", "InfeasibleError",
    "Kind", "LinearConstraint", "ModelAdapter", "NearestNeighbourHull", "PredictorConstr",
    "SolverBackend", "Step", "StructuralEquation",
    "SolverError", "SolverLicenseError", "SolverNotAvailableError", "SolverSettings",
    "Status", "UnsupportedModelError", "add_predictor", "build", "datasets", "diagnose",
    "make_solver", "parse_model", "register_formulation", "register_model",
    "metrics", "supported_models", "tighten_relu_bounds", "__version__",
    "DiverseNeighbours", "DiverseNeighboursResult",
]
