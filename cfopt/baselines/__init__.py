"""Model-agnostic baseline explainers (need only the model's ``predict``).

* :class:`DiverseNeighbours`: diverse counterfactual sets from the training data's
  nearest neighbours of another class, refined by binary search (Leofante & Potyka,
  "Promoting Counterfactual Robustness through Diversity", AAAI 2024).
"""

from .diverse_neighbours import DiverseNeighbours, DiverseNeighboursResult

__all__ = ["DiverseNeighbours", "DiverseNeighboursResult"]
