"""Reverse validation on the moons: which lambda_max it picks from a grid,
against the lambda_max that the target labels (which it never sees) would
pick. The numbers behind docs/dann.md's reverse-validation table.

    python experiments/accuracy/dann_reverse_validation_moons.py [--seeds 0-4] [--grid 0.1,0.3,1,3,6] [--steps 1500]

Per seed and lambda_max: `grad_reverse.adaptation.validation.reverse_validation` of the
demo's DANN (15 sigmoid units, Adam 0.01 with EMA weights, batches of 150
source + 150 target points, the paper's ramp) with 10 % of each domain held
out and hard pseudo-labels; its reverse risk (the reverse model's loss on
the held-out source points), and the forward model's accuracy on all 300
labeled target points. Then per seed: the lambda_max of the lowest reverse
risk, the lambda_max of the highest target accuracy, and the target
accuracy each gets.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dann_moons_seeds import seed_range  # noqa: E402

from grad_reverse.adaptation import select_by_reverse_validation  # noqa: E402
from grad_reverse.demo.data import make_domains  # noqa: E402
from grad_reverse.demo.models import accuracy, build_dann  # noqa: E402
from grad_reverse.demo.training import BATCH_PER_DOMAIN, GAMMA, optimizer  # noqa: E402


def make_model(seed: int, lambda_max: float):
    """The demo's DANN of `seed` (its initial weights follow the seed, as in the demo)."""
    model = build_dann(seed, lambda_max=lambda_max, gamma=GAMMA)
    model.compile(optimizer=optimizer(), loss="binary_crossentropy", metrics=["accuracy"])
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-4"))
    parser.add_argument(
        "--grid", type=lambda text: [float(v) for v in text.split(",")], default=[0.1, 0.3, 1.0, 3.0, 6.0]
    )
    parser.add_argument("--steps", type=int, default=1500)
    args = parser.parse_args()
    rows = []
    for seed in args.seeds:
        domains = make_domains(seed)
        picked, results = select_by_reverse_validation(
            args.grid,
            lambda lambda_max, seed=seed: make_model(seed, lambda_max),
            domains.x_source,
            domains.y_source,
            domains.x_target,
            seed=seed,
            validation_fraction=0.1,
            pseudo_labels=lambda p: (p > 0.5).astype("float32"),
            batch_size=2 * BATCH_PER_DOMAIN,
            epochs=1,
            steps_per_epoch=args.steps,
        )
        target = {lam: accuracy(r.forward_model, domains.x_target, domains.y_target) for lam, r in results.items()}
        for lam, r in results.items():
            print(
                f"seed {seed} lambda_max {lam:g}: reverse risk {r.risk:.4f} reverse accuracy "
                f"{r.metrics['accuracy']:.3f}  target accuracy {target[lam]:.3f}",
                flush=True,
            )
        best = max(target, key=target.get)
        rows.append((seed, picked, target[picked], best, target[best]))
        print(
            f"seed {seed}: reverse validation picks {picked:g} (target accuracy {target[picked]:.3f}); "
            f"the target labels would pick {best:g} ({target[best]:.3f})",
            flush=True,
        )
    print("\n| seed | reverse validation picks | its target accuracy | target labels pick | its target accuracy |")
    print("|---|---|---|---|---|")
    for seed, picked, picked_acc, best, best_acc in rows:
        print(f"| {seed} | {picked:g} | {picked_acc:.3f} | {best:g} | {best_acc:.3f} |")


if __name__ == "__main__":
    main()
