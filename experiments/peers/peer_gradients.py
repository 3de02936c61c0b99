"""Each method's gradients against its authors' code: on one fixed batch (8 source
+ 8 target points) with fixed weights, the gradient of the training objective with
respect to the features, the label head's weights and the domain head's (or MDD's
adversary's) weights, from grad_reverse (`model.objective`, what `train_step`
differentiates) and from the peers' own loss code on PyTorch CPU:

* CDAN, CDAN+E (multilinear and randomized maps): thuml/CDAN's `pytorch/loss.py`
  (`CDAN`, `Entropy`, `grl_hook`) with its `pytorch/network.py`'s
  `AdversarialNetwork` (its reversal hook inside) and `RandomLayer`, as its
  `train_image.py` combines them: `classifier_loss + trade_off * transfer_loss`;
* DANN, MDD (classification and regression): Transfer-Learning-Library's
  `DomainAdversarialLoss` (with its `DomainDiscriminator`),
  `ClassificationMarginDisparityDiscrepancy`, `RegressionMarginDisparityDiscrepancy`
  and `WarmStartGradientReverseLayer`, as its examples combine them.

Neither peer is a dependency: pass checkouts of their sources (--cdan, --tllib)
and a Python with torch and numpy (--peer-python); this script runs itself
there on the batch and weights it saved. Prints the relative difference
`|ours - theirs| / |theirs|` (Euclidean norms) per part, the largest over the
part's tensors, and exits 1 if any is above 1e-5.

    python experiments/peers/peer_gradients.py --cdan PATH/CDAN \\
        --tllib PATH/Transfer-Learning-Library --peer-python PATH/torch-venv/bin/python

Conventions bridged (not differences of the methods): the peers label the
source domain 1 and the target 0, grad_reverse the other way round, so the
peers' domain heads get the last layer negated (`sigmoid(-u)`), and that
layer's gradients are negated back; CDAN's `AdversarialNetwork` runs with its
dropout replaced by the identity and its iteration counter set so that its
reversal coefficient is `calc_coeff(1000)`, which grad_reverse gets as lambda;
TLlib's discriminator runs in eval mode (no dropout) and its reversal with
lo = hi = lambda (a constant coefficient). DANN's default domain term is the
DANN paper's sum of the two domains' means, twice TLlib's, so it is checked
against TLlib with trade-off 2, and `"mean_over_domains"` with trade-off 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import types

N = 8  # source points; as many target points
FEATURES, CLASSES, HIDDEN, RANDOMIZED_DIM = 5, 4, 6, 64
LAMBDA = 0.7  # DANN's and MDD's reversal coefficient
CDAN_ITERATION = 1000  # the authors' iteration whose calc_coeff is CDAN's lambda
PARTS = ("features", "label_head", "adversary")


# ------------------------------------------------------------------ grad_reverse's side


def ours(folder: str) -> list:
    """Runs each case's objective under a tape; saves what the peer needs; returns the case names."""
    import numpy as np
    import tensorflow as tf

    from grad_reverse._tools import keras
    from grad_reverse.adaptation import CDAN, DANN, MDD
    from grad_reverse.adaptation.cdan import random_matrices
    from grad_reverse.schedule import ramp

    rng = np.random.default_rng(0)
    x_source = rng.standard_normal((N, 3)).astype("float32")
    y_source = rng.integers(0, CLASSES, N).astype("int32")
    x_target = (rng.standard_normal((N, 3)) + 0.7).astype("float32")
    y_regression = rng.standard_normal((N, 2)).astype("float32")
    cdan_lambda = float(np.float32(ramp(CDAN_ITERATION / 10000.0, 10.0, 1.0)))  # the authors' calc_coeff

    def dense(inputs, units, activation, seed, stddev=1.0):
        init = keras.initializers.RandomNormal(stddev=stddev, seed=seed)
        return keras.layers.Dense(units, activation=activation, kernel_initializer=init, bias_initializer=init)

    def sequential(inputs, *layers):
        return keras.Sequential([keras.Input((inputs,)), *layers])

    def features():
        return sequential(3, dense(3, FEATURES, "tanh", 1))

    def domain_head(inputs):
        return sequential(
            inputs, dense(inputs, HIDDEN, "relu", 3), dense(HIDDEN, HIDDEN, "relu", 4), dense(HIDDEN, 1, "sigmoid", 5)
        )

    def two_layer(units, seed):  # MDD's heads: a hidden layer, as TLlib's
        return sequential(FEATURES, dense(FEATURES, HIDDEN, "relu", seed), dense(HIDDEN, units, None, seed + 1, 2.0))

    def gradients(model, adversary, label_loss, y, lambda_, **compile_kwargs):
        model.compile(keras.optimizers.SGD(0.0), label_loss, **compile_kwargs)
        with tf.GradientTape() as tape:
            total, _, _, _, f = model.objective(x_source, x_target, y, None, tf.constant(lambda_))
        grads = tape.gradient(total, [f, model.label_head.trainable_variables, adversary.trainable_variables])
        return (
            np.asarray(f),
            [np.asarray(grads[0])],
            [np.asarray(g) for g in grads[1]],
            [np.asarray(g) for g in grads[2]],
        )

    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    saved = {}

    def keep(case, model, adversary, grads, **more):
        f, *ours_grads = grads
        saved[case] = dict(
            f=f,
            label=model.label_head.get_weights(),
            adversary=adversary.get_weights(),
            ours=dict(zip(PARTS, ours_grads)),
            **more,
        )

    for reduction, trade_off in (("sum_over_domains", 2.0), ("mean_over_domains", 1.0)):
        keras.utils.set_random_seed(0)
        label = sequential(FEATURES, dense(FEATURES, CLASSES, None, 2, 2.0))
        model = DANN(features(), label, domain_head(FEATURES), lambda_schedule="constant")
        grads = gradients(model, model.domain_head, cross_entropy, y_source, LAMBDA, domain_loss_reduction=reduction)
        keep(f"DANN {reduction} (TLlib trade-off {trade_off:g})", model, model.domain_head, grads, trade_off=trade_off)
    for entropy in (False, True):
        for randomized in (False, True):
            case = f"CDAN{'+E' if entropy else ''} {'randomized' if randomized else 'multilinear'}"
            label = sequential(FEATURES, dense(FEATURES, CLASSES, None, 2, 2.0))
            size = RANDOMIZED_DIM if randomized else FEATURES * CLASSES
            model = CDAN(
                features(),
                label,
                domain_head(size),
                entropy_conditioning=entropy,
                randomized=randomized,
                randomized_dim=RANDOMIZED_DIM,
                map_seed=5,
                map_gradient=False,  # the authors' code detaches the map's g
            )
            grads = gradients(model, model.domain_head, cross_entropy, y_source, cdan_lambda, label_from_logits=True)
            matrices = random_matrices(FEATURES, CLASSES, RANDOMIZED_DIM, 5) if randomized else None
            keep(case, model, model.domain_head, grads, randomized=matrices)
    for margin, trade_off in ((4.0, 1.0), (2.0, 0.5)):
        case = f"MDD classification, margin {margin:g}, trade-off {trade_off:g}"
        model = MDD(features(), two_layer(CLASSES, 6), two_layer(CLASSES, 8), margin=margin, trade_off=trade_off)
        grads = gradients(model, model.adversarial_head, cross_entropy, y_source, LAMBDA, label_from_logits=True)
        keep(case, model, model.adversarial_head, grads, margin=margin, trade_off=trade_off)
    model = MDD(features(), two_layer(2, 6), two_layer(2, 8), form="regression")
    grads = gradients(model, model.adversarial_head, "mse", y_regression, LAMBDA)
    keep("MDD regression, margin 1", model, model.adversarial_head, grads, margin=1.0, trade_off=1.0)
    common = dict(y_source=y_source, y_regression=y_regression, cdan_lambda=cdan_lambda)
    with open(os.path.join(folder, "batch.pkl"), "wb") as file:
        pickle.dump({"cases": saved, "common": common}, file)
    return list(saved)


# ------------------------------------------------------------------ the peers' side


class _Anything(types.ModuleType):
    """A stand-in for torchvision, which the authors' network.py imports for its backbones only."""

    def __getattr__(self, name):
        return None


def load_cdan(checkout: str) -> tuple:
    import numpy as np
    import torch

    if not hasattr(np, "float"):  # calc_coeff calls np.float (gone in NumPy 1.24)
        np.float = float
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # loss.py moves its domain labels to the GPU
    stand_in = sys.modules.setdefault("torchvision", _Anything("torchvision"))
    stand_in.models = sys.modules.setdefault("torchvision.models", _Anything("torchvision.models"))
    sys.path.insert(0, os.path.join(checkout, "pytorch"))
    return importlib.import_module("loss"), importlib.import_module("network")


def load_tllib(checkout: str) -> tuple:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_losses_tllib import load_tllib_losses  # its package stand-ins and cdan, mdd

    _, mdd = load_tllib_losses(checkout)
    names = ("tllib.alignment.dann", "tllib.modules.grl", "tllib.modules.domain_discriminator")
    return (mdd, *(importlib.import_module(name) for name in names))


def peer(folder: str, cdan_checkout: str, tllib_checkout: str) -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_default_dtype(torch.float32)
    with open(os.path.join(folder, "batch.pkl"), "rb") as file:
        data = pickle.load(file)
    common = data["common"]
    cdan_loss, cdan_network = load_cdan(cdan_checkout)
    mdd, dann, grl, discriminators = load_tllib(tllib_checkout)
    tensor = torch.from_numpy
    labels = tensor(common["y_source"]).long()

    def params(weights):
        return [tensor(w).clone().requires_grad_(True) for w in weights]

    def load_linears(module, weights, negate_last=True):
        linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
        for i, layer in enumerate(linears):
            sign = -1.0 if negate_last and i == len(linears) - 1 else 1.0
            layer.weight.data = sign * tensor(weights[2 * i]).T.contiguous()
            layer.bias.data = sign * tensor(weights[2 * i + 1])
        return linears

    def linear_grads(linears):
        grads = []
        for i, layer in enumerate(linears):
            sign = -1.0 if i == len(linears) - 1 else 1.0
            grads += [sign * layer.weight.grad.T.numpy(), sign * layer.bias.grad.numpy()]
        return grads

    def head(f, w):  # one Dense (logits), or MDD's Dense-relu-Dense
        out = f @ w[0] + w[1]
        return out if len(w) == 2 else torch.relu(out) @ w[2] + w[3]

    def constant_grl(coefficient):
        return grl.WarmStartGradientReverseLayer(alpha=1.0, lo=coefficient, hi=coefficient, max_iters=1000)

    results = {}
    for case, d in data["cases"].items():
        f = tensor(d["f"]).clone().requires_grad_(True)
        label = params(d["label"])
        if case.startswith("DANN"):
            discriminator = discriminators.DomainDiscriminator(FEATURES, HIDDEN, batch_norm=False).eval()
            linears = load_linears(discriminator, d["adversary"])
            transfer = dann.DomainAdversarialLoss(discriminator, grl=constant_grl(LAMBDA))(f[:N], f[N:])
            outputs = head(f, label)
            total = F.cross_entropy(outputs[:N], labels) + d["trade_off"] * transfer
            total.backward()
            adversary = linear_grads(linears)
        elif case.startswith("CDAN"):
            size = RANDOMIZED_DIM if d["randomized"] is not None else FEATURES * CLASSES
            ad_net = cdan_network.AdversarialNetwork(size, HIDDEN)
            ad_net.dropout1 = ad_net.dropout2 = torch.nn.Identity()
            ad_net.train()
            ad_net.iter_num = CDAN_ITERATION - 1  # its forward counts this call first
            linears = load_linears(ad_net, d["adversary"])
            random_layer = None
            if d["randomized"] is not None:
                random_layer = cdan_network.RandomLayer([FEATURES, CLASSES], RANDOMIZED_DIM)
                random_layer.random_matrix = [tensor(m) for m in d["randomized"]]
            outputs = head(f, label)
            softmax_out = torch.nn.Softmax(dim=1)(outputs)
            if "+E" in case:
                entropy = cdan_loss.Entropy(softmax_out)
                coeff = cdan_network.calc_coeff(CDAN_ITERATION)
                transfer = cdan_loss.CDAN([f, softmax_out], ad_net, entropy, coeff, random_layer)
            else:
                transfer = cdan_loss.CDAN([f, softmax_out], ad_net, None, None, random_layer)
            total = torch.nn.CrossEntropyLoss()(outputs[:N], labels) + 1.0 * transfer
            total.backward()
            adversary = linear_grads(linears)
        else:
            adversary_weights = params(d["adversary"])
            y = head(f, label)
            y_adv = head(constant_grl(LAMBDA)(f), adversary_weights)
            if "classification" in case:
                discrepancy = mdd.ClassificationMarginDisparityDiscrepancy(margin=d["margin"])
                label_loss = F.cross_entropy(y[:N], labels)
            else:
                discrepancy = mdd.RegressionMarginDisparityDiscrepancy(margin=d["margin"])
                label_loss = F.mse_loss(y[:N], tensor(common["y_regression"]))
            transfer = -discrepancy(y[:N], y_adv[:N], y[N:], y_adv[N:])  # TLlib's examples train -mdd
            total = label_loss + transfer * d["trade_off"]
            total.backward()
            adversary = [w.grad.numpy() for w in adversary_weights]
        theirs = {"features": [f.grad.numpy()], "label_head": [w.grad.numpy() for w in label], "adversary": adversary}
        results[case] = {part: [g.tolist() for g in theirs[part]] for part in PARTS}
    return results


def relative(ours_grads: list, theirs: list) -> float:
    import numpy as np

    worst = 0.0
    for a, b in zip(ours_grads, theirs):
        a, b = np.asarray(a, "float64"), np.asarray(b, "float64")
        worst = max(worst, float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cdan", required=True, help="a checkout of thuml/CDAN's source")
    parser.add_argument("--tllib", required=True, help="a checkout of Transfer-Learning-Library's source")
    parser.add_argument("--peer-python", default=sys.executable, help="a Python with torch (default: this one)")
    parser.add_argument("--peer-folder", help=argparse.SUPPRESS)  # the peers' run (internal)
    args = parser.parse_args()
    if args.peer_folder:
        print(json.dumps(peer(args.peer_folder, args.cdan, args.tllib)))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        ours(folder)
        with open(os.path.join(folder, "batch.pkl"), "rb") as file:
            mine = pickle.load(file)["cases"]
        run = subprocess.run(
            [args.peer_python, os.path.abspath(__file__), "--cdan", args.cdan, "--tllib", args.tllib]
            + ["--peer-folder", folder],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
            return 1
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
    worst = 0.0
    print(f"{'case':44s} {'features':>10s} {'label head':>11s} {'domain head / adversary':>24s}")
    for case, data in mine.items():
        row = [relative(data["ours"][part], theirs[case][part]) for part in PARTS]
        worst = max(worst, *row)
        print(f"{case:44s} {row[0]:10.2e} {row[1]:11.2e} {row[2]:24.2e}")
    print(f"largest relative difference {worst:.2e} ({'<=' if worst <= 1e-5 else '>'} 1e-5)")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
