"""OR-Tools CP-SAT for tree ensembles (``solver="cpsat"``; ``pip install cfopt[cpsat]``):
OCEAN's exact CP model over threshold levels (Parmentier & Vidal 2021)."""

from .backend import INSTALL_HINT, CpSatBackend, check_supported

__all__ = ["INSTALL_HINT", "CpSatBackend", "check_supported"]
