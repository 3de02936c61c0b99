"""The moons demo's DANN over many seeds, for one lambda_max and one
reduction of the domain loss: the numbers behind docs/demo.md's tables.

    python experiments/accuracy/dann_moons_seeds.py --lambda-max 6 [--reduction sum_over_domains]
        [--seeds 0-19] [--steps 3000] [--source-only]

For each seed: the data, the DANN exactly as `python -m grad_reverse demo`
trains it (optionally with another lambda_max or the earlier
`mean_over_batch` reduction), and its source and target accuracy; with
`--source-only`, the source-only network too. Then the target accuracy's
min, mean and max. One line per seed, so a long run can be watched.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from grad_reverse.adaptation.domain_head import DOMAIN_LOSS_REDUCTIONS, SUM_OVER_DOMAINS  # noqa: E402
from grad_reverse.demo import DEFAULT_STEPS  # noqa: E402
from grad_reverse.demo.data import make_domains  # noqa: E402
from grad_reverse.demo.models import accuracy  # noqa: E402
from grad_reverse.demo.training import train_dann, train_plain  # noqa: E402


def seed_range(text: str) -> list[int]:
    """`"0-19"` or `"0,3,5"` as a list of seeds."""
    if "-" in text:
        first, last = (int(part) for part in text.split("-"))
        return list(range(first, last + 1))
    return [int(part) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lambda-max", type=float, required=True)
    parser.add_argument("--reduction", choices=DOMAIN_LOSS_REDUCTIONS, default=SUM_OVER_DOMAINS)
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-19"))
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--source-only", action="store_true")
    args = parser.parse_args()
    targets = {"dann": [], "plain": []}
    for seed in args.seeds:
        domains = make_domains(seed)
        models = {
            "dann": train_dann(
                domains, seed, args.steps, lambda_max=args.lambda_max, domain_loss_reduction=args.reduction
            )
        }
        if args.source_only:
            models["plain"] = train_plain(domains, seed, args.steps)
        line = [f"seed {seed:2d}"]
        for name, model in models.items():
            source = accuracy(model, domains.x_source, domains.y_source)
            target = accuracy(model, domains.x_target, domains.y_target)
            targets[name].append(target)
            line.append(f"{name} source {source:.3f} target {target:.3f}")
        print("  ".join(line), flush=True)
    for name, values in targets.items():
        if values:
            print(
                f"{name} target accuracy over {len(values)} seeds (lambda_max {args.lambda_max:g}, "
                f"{args.reduction}): min {min(values):.3f} mean {np.mean(values):.3f} max {max(values):.3f}; "
                f">= 0.95 on {sum(v >= 0.95 for v in values)}"
            )


if __name__ == "__main__":
    main()
