"""CDAN's and MDD's losses on one fixed batch: `grad_reverse.CDAN` / `grad_reverse.MDD`
(the term their History logs after one step at learning rate 0) against
Transfer-Learning-Library's loss modules (`ConditionalDomainAdversarialLoss`,
`ClassificationMarginDisparityDiscrepancy`, `RegressionMarginDisparityDiscrepancy`)
on PyTorch CPU, and the relative differences.

TLlib is not a dependency: pass a checkout of its source (github.com/thuml/
Transfer-Learning-Library) with --tllib, and a Python that has torch (and
numpy) with --peer-python; this script runs itself there on the batch and
weights it saved. Only the loss modules' files are loaded (its package
__init__ pulls in torchvision and more).

    python experiments/peers/peer_losses_tllib.py --tllib PATH/Transfer-Learning-Library \\
        --peer-python PATH/to/torch-venv/bin/python

Conventions bridged (not differences of the methods): TLlib labels the source
domain 1 and the target 0, grad_reverse the other way round, so TLlib's
discriminator gets the domain head negated (`sigmoid(-logit)`); TLlib reduces
CDAN's loss over the batch, which is `domain_loss_reduction="mean_over_batch"`
here; TLlib's MDD module returns the discrepancy the adversary maximizes,
grad_reverse logs its negation (the term the objective adds); TLlib's MDD needs
equal source and target counts (16 + 16 here).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types

N = 16  # source points; as many target points
FEATURES, CLASSES, HIDDEN = 5, 4, 6


# ------------------------------------------------------------------ grad_reverse's side


def ours(folder: str) -> dict:
    """Runs each case on grad_reverse's models; saves the batch, features, logits and
    heads' weights for the peer; returns {case: our logged term}."""
    import numpy as np

    import grad_reverse  # noqa: F401  (loads the op)
    from grad_reverse._tools import keras
    from grad_reverse.adaptation import CDAN, MDD
    from grad_reverse.adaptation.cdan import random_matrices

    rng = np.random.default_rng(0)
    x_source = rng.standard_normal((N, 3)).astype("float32")
    y_source = rng.integers(0, CLASSES, N).astype("int32")
    x_target = (rng.standard_normal((N, 3)) + 0.7).astype("float32")
    batch = ((x_source, x_target), y_source)
    import tensorflow as tf

    tf_batch = tf.data.Dataset.from_tensors(batch).repeat()
    x = np.concatenate([x_source, x_target])
    results, saved = {}, {}

    def parts(seed: int, units: int = CLASSES):
        keras.utils.set_random_seed(seed)
        features = keras.Sequential([keras.Input((3,)), keras.layers.Dense(FEATURES, activation="tanh")])
        label = keras.Sequential(
            [
                keras.Input((FEATURES,)),
                keras.layers.Dense(units, kernel_initializer=keras.initializers.RandomNormal(stddev=1.5)),
            ]
        )
        return features, label

    def step(model, loss, batches=tf_batch):
        model.compile(
            keras.optimizers.SGD(0.0),
            loss,
            label_from_logits=True,
            **({"domain_loss_reduction": "mean_over_batch"} if isinstance(model, CDAN) else {}),
        )
        history = model.fit(batches, steps_per_epoch=1, verbose=0).history
        return history["domain_loss" if isinstance(model, CDAN) else "transfer_loss"][0]

    for entropy in (False, True):
        for randomized in (False, True):
            case = f"CDAN{'+E' if entropy else ''} {'randomized (d=64)' if randomized else 'multilinear'}"
            features, label = parts(1)
            size = 64 if randomized else FEATURES * CLASSES
            domain = keras.Sequential(
                [
                    keras.Input((size,)),
                    keras.layers.Dense(HIDDEN, activation="relu"),
                    keras.layers.Dense(1, activation="sigmoid"),
                ]
            )
            model = CDAN(
                features,
                label,
                domain,
                entropy_conditioning=entropy,
                randomized=randomized,
                randomized_dim=64,
                map_seed=5,
                map_gradient=False,  # the authors' code detaches the map's g
            )
            results[case] = step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            f = np.asarray(features(x))
            saved[case] = {
                "f": f,
                "g": np.asarray(label(f)),
                "domain": domain.get_weights(),
                "randomized": random_matrices(FEATURES, CLASSES, 64, 5) if randomized else None,
            }
    for margin in (4.0, 2.0):
        case = f"MDD classification, margin {margin:g}"
        features, label = parts(2)
        model = MDD(features, label, margin=margin)
        results[case] = step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        f = np.asarray(features(x))
        saved[case] = {"y": np.asarray(label(f)), "y_adv": np.asarray(model.adversarial_head(f)), "margin": margin}
    case = "MDD regression, margin 1"
    features, label = parts(3, units=2)
    model = MDD(features, label, form="regression")
    y_regression = rng.standard_normal((N, 2)).astype("float32")
    results[case] = step(model, "mse", tf.data.Dataset.from_tensors(((x_source, x_target), y_regression)).repeat())
    f = np.asarray(features(x))
    saved[case] = {"y": np.asarray(label(f)), "y_adv": np.asarray(model.adversarial_head(f)), "margin": 1.0}
    import pickle

    with open(os.path.join(folder, "batch.pkl"), "wb") as file:
        pickle.dump(saved, file)
    return {k: float(v) for k, v in results.items()}


# ------------------------------------------------------------------ the peer's side


def load_tllib_losses(checkout: str) -> tuple:
    """TLlib's cdan and mdd modules, loaded from the checkout without its package __init__s."""
    import numpy as np

    if not hasattr(np, "float"):  # TLlib's WarmStartGradientReverseLayer calls np.float (gone in NumPy 1.24)
        np.float = float
    root = os.path.join(checkout, "tllib")
    for name, path in (
        ("tllib", root),
        ("tllib.modules", os.path.join(root, "modules")),
        ("tllib.alignment", os.path.join(root, "alignment")),
        ("tllib.utils", os.path.join(root, "utils")),
    ):
        package = types.ModuleType(name)
        package.__path__ = [path]
        sys.modules[name] = package
    metric = types.ModuleType("tllib.utils.metric")  # accuracy helpers only (its __init__ needs prettytable)
    metric.binary_accuracy = metric.accuracy = lambda *args, **kwargs: 0.0
    sys.modules["tllib.utils.metric"] = metric
    return importlib.import_module("tllib.alignment.cdan"), importlib.import_module("tllib.alignment.mdd")


def peer(folder: str, checkout: str) -> dict:
    import pickle

    import torch

    cdan, mdd = load_tllib_losses(checkout)
    torch.set_default_dtype(torch.float32)
    with open(os.path.join(folder, "batch.pkl"), "rb") as file:
        saved = pickle.load(file)
    results = {}
    for case, data in saved.items():
        t = {k: torch.from_numpy(v) for k, v in data.items() if k in ("f", "g", "y", "y_adv")}
        if case.startswith("CDAN"):
            (w1, b1, w2, b2) = (torch.from_numpy(w) for w in data["domain"])
            # TLlib's source label is 1: the domain head negated gives the same domain loss.
            discriminator = lambda h, w1=w1, b1=b1, w2=w2, b2=b2: torch.sigmoid(-(torch.relu(h @ w1 + b1) @ w2 + b2))  # noqa: E731
            randomized = data["randomized"] is not None
            loss = cdan.ConditionalDomainAdversarialLoss(
                discriminator,
                entropy_conditioning="+E" in case,
                randomized=randomized,
                num_classes=CLASSES,
                features_dim=FEATURES,
                randomized_dim=64,
            )
            if randomized:
                loss.map.Rf, loss.map.Rg = (torch.from_numpy(m) for m in data["randomized"])
            value = loss(t["g"][:N], t["f"][:N], t["g"][N:], t["f"][N:])
        elif "classification" in case:
            module = mdd.ClassificationMarginDisparityDiscrepancy(margin=data["margin"])
            value = -module(t["y"][:N], t["y_adv"][:N], t["y"][N:], t["y_adv"][N:])
        else:
            module = mdd.RegressionMarginDisparityDiscrepancy(margin=data["margin"])
            value = -module(t["y"][:N], t["y_adv"][:N], t["y"][N:], t["y_adv"][N:])
        results[case] = float(value)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tllib", required=True, help="a checkout of Transfer-Learning-Library's source")
    parser.add_argument("--peer-python", default=sys.executable, help="a Python with torch (default: this one)")
    parser.add_argument("--peer-folder", help=argparse.SUPPRESS)  # the peer's run (internal)
    args = parser.parse_args()
    if args.peer_folder:
        print(json.dumps(peer(args.peer_folder, args.tllib)))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        mine = ours(folder)
        run = subprocess.run(
            [args.peer_python, os.path.abspath(__file__), "--tllib", args.tllib, "--peer-folder", folder],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
            return 1
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
    worst = 0.0
    print(f"{'case':38s} {'grad_reverse':>14s} {'TLlib (torch)':>14s} {'rel. diff':>10s}")
    for case, value in mine.items():
        difference = abs(value - theirs[case]) / max(abs(theirs[case]), 1e-12)
        worst = max(worst, difference)
        print(f"{case:38s} {value:14.7f} {theirs[case]:14.7f} {difference:10.2e}")
    print(f"largest relative difference {worst:.2e} ({'<=' if worst <= 1e-5 else '>'} 1e-5)")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
