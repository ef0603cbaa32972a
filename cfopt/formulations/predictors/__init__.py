r"""Learned models as Pyomo blocks, with one entry point: :func:`add_predictor`.

In the manner of gurobi-machinelearning, a registry maps each parsed structure type to
the builder of its block (:func:`register_formulation`), and every embedded predictor is
a :class:`PredictorConstr`, which offers :meth:`PredictorConstr.get_error` to measure the
encoding against the real model. One module per predictor kind:

* :mod:`.network` — ReLU networks (torch, ONNX, sklearn MLP): OMLT's full-space
  formulation with the big-M ReLU encoding, hidden neurons rescaled;
* :mod:`.linear` — linear models (a network with a single affine layer):
  ``outputs = W inputs + b``;
* :mod:`.trees` — tree ensembles: the cut and leaf formulation (Mišić 2020);
* :mod:`.base` — :class:`PredictorConstr`, the registry and :func:`add_predictor`.

Every block's variables are ``block.inputs[i]``, the model inputs normalized to their
box, :math:`t_i = (z_i - \ell_i) / w_i \in [0, 1]` (no variable carries an input's
raw magnitude: HiGHS's presolve proved a wrong bound on a model input of magnitude
1e7, differential seed 62407), and ``block.outputs[j]`` (logits);
``block.model_inputs[i]`` are the model inputs :math:`z_i = \ell_i + w_i t_i`
(expressions; :attr:`PredictorConstr.inputs`).
"""

from . import network, trees  # noqa: F401  (register the formulations)
from .base import NetworkCopy, PredictorConstr, add_predictor, register_formulation
from .network import NetworkPredictorConstr
from .trees import TreePredictorConstr

__all__ = ["NetworkCopy", "NetworkPredictorConstr", "PredictorConstr", "TreePredictorConstr",
           "add_predictor", "register_formulation"]
