"""The validators' study: which one, without target labels, chooses a model as
good as the labels would, and never worse than not adapting?

    python experiments/accuracy/validator_study.py --shift moons --seeds 0-4 --out build-validators
    python experiments/accuracy/validator_study_table.py build-validators > docs/results/validators.md

For each shift and seed it trains every candidate, the plain network (a DANN
with domain_loss_weight 0) and DANN, CDAN, CDAN+E and MDD at three lambdas,
for `EPOCHS` epochs, and at each epoch's end (a checkpoint) records the
target accuracy (labels used for this record only) and every validator's
score (`ValidatorCallback`, on held-out source points and the unlabeled
target). One JSON line per checkpoint goes to `<out>/<shift>.jsonl`.

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
from validator_shifts import SHIFTS  # noqa: E402

from grad_reverse._tools import keras  # noqa: E402
from grad_reverse.adaptation import CDAN, DANN, MDD, ValidatorCallback  # noqa: E402
from grad_reverse.adaptation.reverse_validation import ReverseValidator  # noqa: E402
from grad_reverse.adaptation.validators import VALIDATORS  # noqa: E402

EPOCHS = 4
LAMBDA_FACTORS = (0.3, 1.0, 3.0)  # times the shift's lambda_max (DANN, CDAN); MDD: times 0.1
METHODS = ("dann", "cdan", "cdan_e", "mdd")
HELD_OUT = 0.2  # of the source, for the validators only
VALIDATION_POINTS = 2000  # at most, per domain, for the validators


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


class TargetAccuracy(keras.callbacks.Callback):
    """Records each epoch's logs with the target accuracy (the study's ground truth)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, rows: list):
        super().__init__()
        self.x, self.y, self.rows = x, y, rows

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        p = np.asarray(self.model.predict(self.x, batch_size=1024, verbose=0))
        predicted = (p[:, 0] > 0.5).astype(int) if p.shape[1] == 1 else p.argmax(1)
        self.rows.append({"epoch": epoch + 1, "target_accuracy": float(np.mean(predicted == self.y)), **(logs or {})})


def run(shift_name: str, seed: int, out: str, reverse: bool) -> None:
    shift = SHIFTS[shift_name]
    data = shift.data(seed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data.x_source))
    held = int(len(order) * HELD_OUT)
    val, train = order[:held], order[held:]
    x_val, y_val = data.x_source[val][:VALIDATION_POINTS], data.y_source[val][:VALIDATION_POINTS]
    sample = np.sort(rng.permutation(len(data.x_target))[:VALIDATION_POINTS])
    validators = list(VALIDATORS)
    steps_per_epoch = shift.steps // EPOCHS
    with open(os.path.join(out, f"{shift_name}.jsonl"), "a") as f:
        for name, method, lambda_max in candidates(shift):
            start = time.perf_counter()
            rows: list = []
            model = build(shift, method, lambda_max, seed)
            scorer = ValidatorCallback(validators, x_val, y_val, data.x_target[sample])
            model.fit(
                data.x_source[train],
                data.y_source[train],
                target=data.x_target,
                batch_size=shift.batch_size,
                steps_per_epoch=steps_per_epoch,
                epochs=EPOCHS,
                seed=seed,
                verbose=0,
                callbacks=[scorer, TargetAccuracy(data.x_target, data.y_target, rows)],
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
                row = {k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in row.items()}
                f.write(json.dumps(row) + "\n")
            f.flush()
            last = rows[-1]
            print(
                f"{shift_name} seed {seed} {name:16s} target {last['target_accuracy']:.3f} "
                f"snd {last['val_snd']:.4f} dev {last['val_dev']:.4f} ({time.perf_counter() - start:.0f} s)",
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
