"""Adversaries of the cutting-set loop (:class:`~cfopt.methods.cutting_set.Adversary`):
model shift Δ (PROPLACE) and K-perturbations (Virgolin & Fracaros)."""

from .k_neighbourhood import KAdversary, KNeighbourhoodAdversary
from .model_shift import ModelShiftAdversary, RegionReport, RobustnessChecker

__all__ = ["KAdversary", "KNeighbourhoodAdversary", "ModelShiftAdversary", "RegionReport",
           "RobustnessChecker"]
