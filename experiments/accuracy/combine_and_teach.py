"""Combine, then teach: the gated ensemble and the student taught from it, on
the validators' study's trained candidates, beside every earlier way.

    python experiments/accuracy/validator_study.py --shift moons --seeds 0-4 --out build-validators
    python experiments/accuracy/combine_and_teach.py --shift moons --seeds 0-4 --out build-validators

For each shift and seed, the study's 13 candidates are rebuilt from their
last checkpoint's weights (`validator_study.py` saved them), and the
package's own `select_without_labels` is given them with the study's
held-out source points and target sample (the same seeded draws). It gives
the default choice (held-out source accuracy) and `Selection.ensemble`;
then a `Student` of the shift's networks (the plain network's seed, so the
same initial weights) is trained from that ensemble with the shift's
optimizer, batch and steps, on the source points the candidates trained on
and every target point. Target accuracies are on every target point (the
labels are read for this record only). One JSON line per seed goes to
`<out>/teach/<shift>.jsonl`; `combine_and_teach_table.py` makes the table.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import validator_study as study  # noqa: E402
from dann_moons_seeds import seed_range  # noqa: E402

from grad_reverse.adaptation import ProbabilityEnsemble, Student, select_without_labels  # noqa: E402
from grad_reverse.adaptation.validation.outputs import label_from_logits  # noqa: E402


def held_out_split(data: object, seed: int) -> tuple:
    """The study's draws (`validator_study.run`): `(train, val, sample)` indices."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data.x_source))
    held = int(len(order) * study.HELD_OUT)
    val, train = order[:held][: study.VALIDATION_POINTS], order[held:]
    sample = np.sort(rng.permutation(len(data.x_target))[: study.VALIDATION_POINTS])
    return train, val, sample


def candidate_models(shift: object, seed: int, folder: str, x_point: np.ndarray) -> dict:
    """`{name: the candidate at its last checkpoint}`, rebuilt from the saved weights."""
    models = {}
    for name, method, lambda_max in study.candidates(shift):
        model = study.build(shift, method, lambda_max, seed)
        model(x_point)
        model.load_weights(os.path.join(folder, name, f"e{study.EPOCHS}.weights.h5"))
        models[name] = model
    return models


def accuracy(model: object, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(study.predicted_classes(np.asarray(model.predict(x, batch_size=1024, verbose=0))) == y))


def every_candidate(models: dict) -> ProbabilityEnsemble:
    """The mean of every candidate's probabilities, ungated (`all_mean`)."""
    return ProbabilityEnsemble(list(models.values()), [label_from_logits("study", m) for m in models.values()])


def teach(shift: object, data: object, train: np.ndarray, teacher: object, seed: int, **recipe: float) -> Student:
    features, label, _ = shift.parts(seed)
    student = Student(features, label, teacher, **recipe)
    student.compile(shift.optimizer(), shift.loss)
    student.fit(
        data.x_source[train],
        data.y_source[train],
        target=data.x_target,
        batch_size=shift.batch_size,
        steps_per_epoch=shift.steps // study.EPOCHS,
        epochs=study.EPOCHS,
        seed=seed,
        verbose=0,
    )
    return student


def run(shift_name: str, seed: int, out: str, recipes: list) -> dict:
    shift = study.SHIFTS[shift_name]
    data = shift.data(seed)
    train, val, sample = held_out_split(data, seed)
    folder = os.path.join(out, "outputs", shift_name, f"seed{seed}")
    models = candidate_models(shift, seed, folder, data.x_source[:1])
    start = time.perf_counter()
    selection = select_without_labels(models, data.x_source[val], data.y_source[val], data.x_target[sample])
    target = {n: accuracy(m, data.x_target, data.y_target) for n, m in models.items()}
    row = {
        "shift": shift_name,
        "seed": seed,
        "plain": target["plain"],
        "default": target[selection.name],
        "default_pick": selection.name,
        "ensemble": accuracy(selection.ensemble, data.x_target, data.y_target),
        "ensemble_members": selection.ensemble_members,
        "all_mean": accuracy(every_candidate(models), data.x_target, data.y_target),
        "oracle": max(target.values()),
        "candidates": target,
    }
    for recipe in recipes:  # the package's defaults first ("default"), then variants "confidence:entropy:source"
        values = {} if recipe == "default" else dict(zip(RECIPE_KEYS, map(float, recipe.split(":"))))
        student = teach(shift, data, train, selection.ensemble, seed, **values)
        row["student" if recipe == "default" else f"student[{recipe}]"] = accuracy(
            student, data.x_target, data.y_target
        )
    row["seconds"] = time.perf_counter() - start
    return row


RECIPE_KEYS = ("confidence", "entropy_weight", "source_weight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shift", choices=sorted(study.SHIFTS), required=True)
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-2"))
    parser.add_argument("--out", default="build-validators")
    parser.add_argument(
        "--recipes", nargs="+", default=["default"], help='"default" (the package\'s), or "confidence:entropy:source"'
    )
    args = parser.parse_args()
    os.makedirs(os.path.join(args.out, "teach"), exist_ok=True)
    for seed in args.seeds:
        row = run(args.shift, seed, args.out, args.recipes)
        with open(os.path.join(args.out, "teach", f"{args.shift}.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{args.shift} seed {seed}: plain {row['plain']:.3f} default {row['default']:.3f} "
            f"ensemble {row['ensemble']:.3f} ({len(row['ensemble_members'])} members) all {row['all_mean']:.3f} "
            + " ".join(f"{k} {v:.3f}" for k, v in row.items() if k.startswith("student"))
            + f" oracle {row['oracle']:.3f} ({row['seconds']:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
