"""Model-agnostic baseline explainers (need only the model's ``predict``).

* :class:`DiverseNeighbours`: diverse counterfactual sets from the training data's
  nearest neighbours of another class, refined by binary search (Leofante & Potyka,
  "Promoting Counterfactual Robustness through Diversity", AAAI 2024).
* :class:`MDPSO`: diverse counterfactual sets by mixed-discrete particle swarm
  optimisation on the features of largest information value (Shekhar et al.).
* :class:`CoGS`: one counterfactual by a genetic algorithm, plausible by construction,
  optionally robust to C-setbacks and K-perturbations (Virgolin & Fracaros 2023).
"""

from .cogs import CoGS
from .diverse_neighbours import DiverseNeighbours, DiverseNeighboursResult
from .mdpso import MDPSO

__all__ = ["CoGS", "DiverseNeighbours", "DiverseNeighboursResult", "MDPSO"]
