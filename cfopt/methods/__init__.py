"""Robust counterfactual methods, all on one cutting-set engine.

* :mod:`.cutting_set` — the loop (master → adversaries → cuts), its deadline and
  statuses, and the :class:`Master` / :class:`Adversary` protocol a new method
  implements;
* :mod:`.adversaries` — model shift Δ (:mod:`.adversaries.model_shift`) and
  K-perturbations (:mod:`.adversaries.k_neighbourhood`);
* :mod:`.proplace` — PROPLACE (Jiang et al. 2024, Algorithm 1), with its plausible
  region (:mod:`.plausible_region`);
* :mod:`.milp_r` — the MILP and MILP-R baselines; :mod:`.rnce` — RNCE;
* :mod:`.k_robust` — C- and K-robust counterfactuals (Virgolin & Fracaros 2023);
* :mod:`.combined` — counterfactuals certified both Δ-robust and K-robust (one loop,
  both adversaries);
* :mod:`.base` — what the model-shift methods share.

Their answers, verdicts and certificates are :mod:`cfopt.results.robust`.
"""

from .adversaries import KAdversary, RobustnessChecker
from .combined import CombinedRobustExplainer
from .cutting_set import Adversary, Check, CuttingSet, Deadline, LoopResult, Master, MasterAnswer
from .k_robust import PerturbationRobustExplainer
from .milp_r import MILPR, NonRobustMILP
from .plausible_region import RobustPlausibleRegion
from .proplace import Proplace
from .rnce import RNCE

__all__ = [
    "Adversary", "Check", "CombinedRobustExplainer", "CuttingSet", "Deadline", "KAdversary",
    "LoopResult", "Master", "MasterAnswer", "MILPR", "NonRobustMILP",
    "PerturbationRobustExplainer", "Proplace", "RNCE", "RobustnessChecker",
    "RobustPlausibleRegion",
]
