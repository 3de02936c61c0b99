"""The validators' study: which one, without target labels, chooses a model as
good as the labels would, and never worse than not adapting?

    python experiments/accuracy/validator_study.py --shift moons --seeds 0-4 --out build-validators
    python experiments/accuracy/validator_study_table.py build-validators > docs/results/validators.md

For each shift and seed it trains every candidate, the plain network (a DANN
with domain_loss_weight 0) and DANN, CDAN, CDAN+E and MDD at three lambdas,
for `EPOCHS` epochs, and at each epoch's end (a checkpoint) records the
target accuracy (labels used for this record only) and what every validator
reads of the model (`CheckpointOutputs`): one JSON line per checkpoint goes
to `<out>/<shift>.jsonl`, its outputs to `<out>/outputs/<shift>/seed<seed>/
<candidate>/e<epoch>.npz` (and the weights beside them). The scores are
computed from those files by `validator_study_scores.py`, so a new
validator or rule is scored on every shift without training again. Each
seed also trains the ceiling: the plain network on half the target's labels,
its accuracy on the other half (`candidate` "target_trained", never in a pool).

The shifts (`validator_shifts`): moons, blobs (label shift), digits-M,
Fashion-MNIST-M (the project's own), and two designed for this study:
moons-affine (a shear and a shift instead of a rotation) and
digits-inverted (an image shift: digits inverted, tinted and noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from dann_moons_seeds import seed_range  # noqa: E402
from teach_new_shifts import TEACH_SHIFTS  # noqa: E402
from validator_new_shifts import NEW_SHIFTS  # noqa: E402
from validator_shifts import SHIFTS as OLD_SHIFTS  # noqa: E402

from grad_reverse._tools import keras  # noqa: E402
from grad_reverse.adaptation import CDAN, DANN, MDD  # noqa: E402
from grad_reverse.adaptation.validation.outputs import (  # noqa: E402
    label_from_logits,
    model_outputs,
    predicted_probabilities,
)
from grad_reverse.adaptation.validation.reverse_validation import ReverseValidator  # noqa: E402

EPOCHS = 4
LAMBDA_FACTORS = (0.3, 1.0, 3.0)  # times the shift's lambda_max (DANN, CDAN); MDD: times 0.1
METHODS = ("dann", "cdan", "cdan_e", "mdd")
# The study's six, then those the rule met after it was fixed, then those designed after round three's fixing commit.
SHIFTS = {**OLD_SHIFTS, **NEW_SHIFTS, **TEACH_SHIFTS}
HELD_OUT = 0.2  # of the source, for the validators only
VALIDATION_POINTS = 2000  # at most, per domain, for the validators
MIX_RATIO = 0.55  # MixVal's (Hu et al. 2023; skada's default): the mixtures' predictions are saved for it


def candidates(shift: object) -> list:
    """`[(name, method, lambda_max)]`, the plain network first."""
    rows = [("plain", "plain", 0.0)]
    for method in METHODS:
        base = 0.1 if method == "mdd" else shift.lambda_max
        rows += [(f"{method}@{base * f:g}", method, base * f) for f in LAMBDA_FACTORS]
    return rows


def build(shift: object, method: str, lambda_max: float, seed: int) -> object:
    features, label, domain = shift.parts(seed)
    extra: dict = {}
    if method in ("plain", "dann"):
        model = DANN(features, label, domain, lambda_max=lambda_max or 1.0)
        if method == "plain":
            extra = {"domain_loss_weight": 0.0}
    elif method in ("cdan", "cdan_e"):
        model = CDAN(features, label, domain, lambda_max=lambda_max, entropy_conditioning=method == "cdan_e")
    else:
        model = MDD(features, label, lambda_max=lambda_max)
    model.compile(shift.optimizer(), shift.loss, **extra)
    return model


def predicted_classes(p: np.ndarray) -> np.ndarray:
    return (p[:, 0] > 0.5).astype(int) if p.shape[1] == 1 else p.argmax(1)


class TargetAccuracy(keras.callbacks.Callback):
    """Records each epoch's logs with the target accuracy (the study's ground truth)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, rows: list):
        super().__init__()
        self.x, self.y, self.rows = x, y, rows

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        p = np.asarray(self.model.predict(self.x, batch_size=1024, verbose=0))
        self.rows.append(
            {"epoch": epoch + 1, "target_accuracy": float(np.mean(predicted_classes(p) == self.y)), **(logs or {})}
        )


class CheckpointOutputs(keras.callbacks.Callback):
    """Saves, at each epoch's end, what the validators read of the model: the
    held-out source's and the target sample's features and class probabilities
    (`model_outputs`), the probabilities on the target sample's mixtures
    `MIX_RATIO * x + (1 - MIX_RATIO) * x[permutation]` (MixVal), the sample's
    labels (for the record only), and the weights."""

    def __init__(self, folder: str, x_val, y_val, x_sample, y_sample, permutation):
        super().__init__()
        self.folder, self.x_val, self.y_val = folder, x_val, y_val
        self.x_sample, self.y_sample, self.permutation = x_sample, y_sample, permutation
        self.mixed = (MIX_RATIO * x_sample + (1.0 - MIX_RATIO) * x_sample[permutation]).astype(x_sample.dtype)
        os.makedirs(folder, exist_ok=True)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        o = model_outputs("study", self.model, self.x_val, self.y_val, self.x_sample)
        # The mixtures' probabilities the way MixVal reads them (`MixVal.score_model`).
        mixed = predicted_probabilities("study", self.model, self.mixed, label_from_logits("study", self.model))
        path = os.path.join(self.folder, f"e{epoch + 1}")
        np.savez_compressed(
            path + ".npz",
            source_features=o.source_features.astype(np.float16),
            source_probabilities=o.source_probabilities.astype(np.float32),
            source_labels=o.source_labels.astype(np.int16),
            target_features=o.target_features.astype(np.float16),
            target_probabilities=o.target_probabilities.astype(np.float32),
            mixed_target_probabilities=mixed.astype(np.float32),
            mix_permutation=self.permutation,
            mix_ratio=np.float32(MIX_RATIO),
            target_labels=self.y_sample.astype(np.int16),
        )
        self.model.save_weights(path + ".weights.h5")


def ema_swap(model: object) -> list:
    """`[SwapEMAWeights]` when the model's optimizer keeps an EMA, so that each
    epoch's end sees the weights the fit ends with (listed first)."""
    return [keras.callbacks.SwapEMAWeights(swap_on_epoch=True)] if getattr(model.optimizer, "use_ema", False) else []


def target_trained(shift: object, data: object, seed: int) -> float:
    """The ceiling: the plain network trained on half the target's labels, its
    accuracy on the other half."""
    order = np.random.default_rng(seed + 1).permutation(len(data.x_target))
    train, test = order[: len(order) // 2], order[len(order) // 2 :]
    y = data.y_target.reshape(-1, 1).astype("float32") if shift.loss == "binary_crossentropy" else data.y_target
    model = build(shift, "plain", 0.0, seed)
    model.fit(
        data.x_target[train],
        y[train],
        target=data.x_target[train],
        batch_size=shift.batch_size,
        steps_per_epoch=shift.steps // EPOCHS,
        epochs=EPOCHS,
        seed=seed,
        verbose=0,
        callbacks=ema_swap(model),
    )
    p = np.asarray(model.predict(data.x_target[test], batch_size=1024, verbose=0))
    return float(np.mean(predicted_classes(p) == data.y_target[test]))


def run(shift_name: str, seed: int, out: str, reverse: bool) -> None:
    shift = SHIFTS[shift_name]
    data = shift.data(seed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data.x_source))
    held = int(len(order) * HELD_OUT)
    val, train = order[:held], order[held:]
    x_val, y_val = data.x_source[val][:VALIDATION_POINTS], data.y_source[val][:VALIDATION_POINTS]
    sample = np.sort(rng.permutation(len(data.x_target))[:VALIDATION_POINTS])
    permutation = np.random.default_rng(seed + 2).permutation(len(sample))
    steps_per_epoch = shift.steps // EPOCHS
    with open(os.path.join(out, f"{shift_name}.jsonl"), "a") as f:
        start = time.perf_counter()
        row = {"shift": shift_name, "seed": seed, "candidate": "target_trained", "method": "plain", "epoch": EPOCHS}
        row["target_accuracy"] = target_trained(shift, data, seed)
        f.write(json.dumps(row) + "\n")
        print(
            f"{shift_name} seed {seed} {'target_trained':16s} target {row['target_accuracy']:.3f} "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
        for name, method, lambda_max in candidates(shift):
            start = time.perf_counter()
            rows: list = []
            model = build(shift, method, lambda_max, seed)
            folder = os.path.join(out, "outputs", shift_name, f"seed{seed}", name)
            recorder = CheckpointOutputs(
                folder, x_val, y_val, data.x_target[sample], data.y_target[sample], permutation
            )
            model.fit(
                data.x_source[train],
                data.y_source[train],
                target=data.x_target,
                batch_size=shift.batch_size,
                steps_per_epoch=steps_per_epoch,
                epochs=EPOCHS,
                seed=seed,
                verbose=0,
                callbacks=ema_swap(model) + [recorder, TargetAccuracy(data.x_target, data.y_target, rows)],
            )
            if reverse:  # the dearest validator: the last checkpoint only
                rows[-1]["val_reverse"] = ReverseValidator(
                    lambda m=method, lam=lambda_max: build(shift, m, lam, seed),
                    seed=seed,
                    batch_size=shift.batch_size,
                    steps_per_epoch=shift.steps,
                )(model, x_val, y_val, data.x_target[sample])
            for row in rows:
                row = {"shift": shift_name, "seed": seed, "candidate": name, "method": method, **row}
                row["outputs"] = os.path.relpath(os.path.join(folder, f"e{row['epoch']}.npz"), out)
                row = {k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in row.items()}
                f.write(json.dumps(row) + "\n")
            f.flush()
            print(
                f"{shift_name} seed {seed} {name:16s} target {rows[-1]['target_accuracy']:.3f} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shift", choices=sorted(SHIFTS), required=True)
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-2"))
    parser.add_argument("--out", default="build-validators")
    parser.add_argument("--reverse", action="store_true", help="also reverse validation, at the last checkpoint")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for seed in args.seeds:
        run(args.shift, seed, args.out, args.reverse)


if __name__ == "__main__":
    main()
