"""PyTorch ``nn.Sequential`` networks read layer by layer
(:mod:`cfopt.models.torch_sequential`): tiny nets' parsed weights reproduce the net's own
output, predictions in the net's own precision, the final activations, the fingerprint
of the live network, and the layers refused with a message naming them."""

from __future__ import annotations

import numpy as np
import pytest

from cfopt.errors import UnsupportedModelError
from cfopt.models.torch_sequential import TorchSequentialAdapter

torch = pytest.importorskip("torch")
nn = torch.nn

Z = np.random.default_rng(0).normal(size=(12, 3))


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def net(*layers):
    return nn.Sequential(*layers).eval()


def torch_out(model, Z, dtype=torch.float64):
    with torch.no_grad():
        return model.to(dtype)(torch.as_tensor(Z, dtype=dtype)).numpy().reshape(len(Z), -1)


def test_a_net_reproduces_its_own_output():
    model = net(nn.Flatten(), nn.Linear(3, 4), nn.ReLU(), nn.Dropout(0.5),
                nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Identity()), nn.Linear(5, 3, bias=False))
    a = TorchSequentialAdapter(model)
    assert [layer.relu for layer in a.structure.layers] == [True, True, False]
    assert a.structure.layers[2].bias.tolist() == [0.0, 0.0, 0.0]
    assert a.structure.layers[0].weight.dtype == np.float64
    assert a.decision == "argmax" and a.classes == (0, 1, 2) and a.transform is None
    import copy
    exact = torch_out(copy.deepcopy(model), Z)
    assert np.allclose(a.structure.logits(Z), exact, rtol=0, atol=1e-12)
    assert np.array_equal(a.output(Z), exact) and a.output(Z[0]).shape == (1, 3)
    assert np.array_equal(a.output_from_logits(exact), exact)
    assert np.array_equal(a.predict(Z), exact.argmax(axis=1))
    assert next(model.parameters()).dtype == torch.float32  # the user's net untouched


@pytest.mark.parametrize("last, transform", [(nn.Sigmoid(), "sigmoid"),
                                             (nn.Softmax(dim=1), "softmax"),
                                             (nn.Softmax(dim=-1), "softmax"),
                                             (nn.LogSoftmax(dim=1), "log_softmax")])
def test_final_activations(last, transform):
    k = 1 if transform == "sigmoid" else 3
    model = net(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, k), last)
    with torch.no_grad():  # both classes (all three) among the points
        model[2].bias.sub_(torch.as_tensor(np.median(torch_out(model[:3], Z), axis=0)))
    a = TorchSequentialAdapter(model)
    assert a.transform == transform and a.decision == ("sign" if k == 1 else "argmax")
    assert a.classes == ((0, 1) if k == 1 else (0, 1, 2))
    out = torch_out(model, Z)
    logits = a.structure.logits(Z)
    assert np.allclose(a.output_from_logits(logits), out, rtol=0, atol=1e-12)
    labels = (out[:, 0] > 0.5).astype(int) if k == 1 else out.argmax(axis=1)
    assert np.array_equal(a.predict(Z), labels) and len(set(labels)) > 1


def test_predictions_in_the_nets_own_precision():
    """1 + 1e-9 is 1 in float32: the float32 net's logit is 0 (class 0) where the exact
    one is 1e-9 (class 1); a float64 net predicts class 1."""
    model = net(nn.Linear(1, 1))
    with torch.no_grad():
        model[0].weight.fill_(1.0)
        model[0].bias.fill_(-1.0)
    x = np.array([[1.0 + 1e-9]])
    a = TorchSequentialAdapter(model)
    assert a.predict(x).tolist() == [0] and a.output(x)[0, 0] > 0
    assert TorchSequentialAdapter(model.double()).predict(x).tolist() == [1]


def test_the_fingerprint_follows_the_live_net():
    def linear(bias):
        layer = nn.Linear(3, 1)
        with torch.no_grad():
            layer.weight.copy_(torch.tensor([[1.0, 2.0, 3.0]]))
            layer.bias.fill_(bias)
        return layer

    model = net(linear(0.5))
    a = TorchSequentialAdapter(model)
    before = a.fingerprint()
    assert len(before) == 16 and before == TorchSequentialAdapter(net(linear(0.5))
                                                                  ).fingerprint()
    with torch.no_grad():
        model[0].bias.add_(1.0)
    assert a.fingerprint() != before
    assert a.fingerprint() == TorchSequentialAdapter(net(linear(1.5))).fingerprint()
    shifted = net(nn.Identity(), linear(1.5))  # the same tensors, other names
    assert TorchSequentialAdapter(shifted).fingerprint() != a.fingerprint()


@pytest.mark.parametrize("layers, message", [
    ((nn.ReLU(), nn.Linear(3, 1)), r"^torch layer 0 \(ReLU\) precedes any Linear layer; "
                                   r"inputs must enter a Linear layer$"),
    ((nn.Linear(3, 2), nn.Flatten(), nn.Linear(2, 1)),
     r"^torch layer 1 \(Flatten\) is only supported before the first Linear layer$"),
    ((nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1)),
     r"^torch layer 1 \(Tanh\) is not supported as a hidden layer: cfopt encodes Linear and "
     r"ReLU layers exactly \(with an optional final Sigmoid/Softmax\); Tanh is not one of "
     r"them$"),
    ((nn.Linear(3, 2), nn.Sigmoid(), nn.Linear(2, 1)),
     r"^torch layer 1 \(Sigmoid\) is not supported as a hidden layer"),
    ((nn.Linear(3, 1), nn.Tanh()), r"^torch layer 1 \(Tanh\) is not supported as the output "
                                   r"layer"),
    ((nn.Sigmoid(),), r"^torch layer 0 \(Sigmoid\) is not supported as the output layer"),
    ((nn.Linear(3, 3), nn.Softmax(dim=0)),
     r"^torch layer 1 \(Softmax\) must act on the class dimension \(dim=-1 or 1\), got "
     r"dim=0$"),
    ((nn.Linear(3, 3), nn.LogSoftmax(dim=0)), r"^torch layer 1 \(LogSoftmax\) must act"),
    ((nn.Identity(), nn.Dropout()), r"^the torch Sequential has no Linear layer$"),
    ((nn.Linear(3, 2), nn.ReLU()), r"^the torch Sequential ends with ReLU; its last Linear "
                                   r"layer must output the logits$"),
    ((nn.Linear(3, 2), nn.Sigmoid()), r"^a final Sigmoid needs a single output logit; use "
                                      r"Softmax for several classes$"),
    ((nn.Linear(3, 1), nn.Softmax(dim=1)), r"^a final Softmax over a single output is "
                                           r"constant$"),
    ((nn.Linear(3, 1), nn.LogSoftmax(dim=-1)), r"^a final Softmax over a single output"),
])
def test_layers_refused(layers, message):
    with pytest.raises(UnsupportedModelError, match=message):
        TorchSequentialAdapter(net(*layers))


def test_a_softmax_without_dim_is_read_on_the_classes():
    model = net(nn.Linear(3, 3), nn.Softmax(dim=None))
    a = TorchSequentialAdapter(model)
    assert a.transform == "softmax"
    with pytest.warns(UserWarning):
        out = torch_out(model, Z)
    assert np.allclose(a.output_from_logits(a.structure.logits(Z)), out, atol=1e-12)


def test_the_adapter_predicts_with_its_own_copies():
    """Parsing leaves the user's net in training mode; the adapter predicts (in eval
    mode: no dropout) and outputs with the weights it parsed, and reads float32 rows."""
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Dropout(0.9), nn.Linear(4, 1))
    a = TorchSequentialAdapter(model)
    assert model.training and all(m.training for m in model)
    logits = a.structure.logits(Z)
    assert np.array_equal(a.predict(Z), (logits[:, 0] > 0).astype(int))
    assert np.allclose(a.output(Z.astype(np.float32)), a.structure.logits(
        Z.astype(np.float32)), atol=1e-12)
    with torch.no_grad():
        model[3].bias.add_(100.0)
    assert np.array_equal(a.predict(Z), (logits[:, 0] > 0).astype(int))
    assert np.allclose(a.output(Z), logits, atol=1e-12)
