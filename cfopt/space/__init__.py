"""The declared feature space, from raw rows to the learned model's inputs.

* :mod:`.feature` — :class:`Feature`, its :class:`Kind` and :class:`Perturbation`;
* :mod:`.space` — :class:`FeatureSpace`: the ordered features and the exact raw-to-input map;
* :mod:`.infer` — a feature inferred from a column of training rows;
* :mod:`.validate` — raw rows checked against the features;
* :mod:`.encoding` — model inputs as exact functions of raw features (:class:`InputSpec`),
  of the space's own transform or of an sklearn preprocessing pipeline;
* :mod:`.perturbations` — the sampled adverse perturbations of a counterfactual
  (C-setbacks, K-neighbourhoods) that the features' annotations allow.
"""

from .feature import Feature, Kind, Perturbation
from .space import FeatureSpace
from .validate import as_frame

__all__ = ["Feature", "FeatureSpace", "Kind", "Perturbation", "as_frame"]
