"""The validators' study's tables, from the JSON lines `validator_study.py` wrote:

    python experiments/accuracy/validator_study_table.py build-validators [--markdown]

Per shift and validator, over the seeds:
Two pools: every checkpoint of every candidate (choosing the method, lambda
and epoch), and each candidate's last checkpoint (the method and lambda).

* rank: Spearman's rank correlation of the score with the target accuracy,
  over every checkpoint of every candidate of a seed (mean over seeds);
* plain / chosen / oracle: mean target accuracy of the plain network (its
  last checkpoint: what a user gets without adapting), of the checkpoint the
  validator ranks first, and of the pool's best (the oracle: labels needed);
* recovered: (chosen - plain) / (oracle - plain) of those means;
* worse: on how many seeds the choice is below the plain network (> 1 point below).

`reverse` scores the last checkpoints only (it trains a model per score);
its choice is among those.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from collections import defaultdict

import numpy as np
from scipy.stats import spearmanr

VALIDATORS = ("source_accuracy", "entropy", "im", "snd", "dev", "source_and_alignment", "reverse")
POINT = 0.01


def load(folder: str) -> dict:
    """`{shift: {seed: [rows]}}`."""
    runs: dict = defaultdict(lambda: defaultdict(list))
    for path in sorted(glob.glob(os.path.join(folder, "*.jsonl"))):
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                runs[row["shift"]][row["seed"]].append(row)
    return runs


def last_epoch(rows: list) -> int:
    return max(r["epoch"] for r in rows)


def choose(rows: list, key: str) -> dict:
    """The row `key` ranks first; a tie goes to the plain network, then to the later checkpoint."""
    scored = [r for r in rows if key in r]
    best = max(r[key] for r in scored)
    tied = [r for r in scored if r[key] == best]
    return min(tied, key=lambda r: (r["candidate"] != "plain", -r["epoch"]))


def seed_result(rows: list, validator: str, last_only: bool = False) -> dict | None:
    """One seed's figures; `last_only`: the candidates' last checkpoints are the pool."""
    key = f"val_{validator}"
    scored = [r for r in rows if key in r and (not last_only or r["epoch"] == last_epoch(rows))]
    if not scored:
        return None
    plain = next(r for r in rows if r["candidate"] == "plain" and r["epoch"] == last_epoch(rows))
    scores = [r[key] for r in scored]
    accuracies = [r["target_accuracy"] for r in scored]
    rank = spearmanr(scores, accuracies).statistic if len(set(scores)) > 1 else float("nan")
    return {
        "rank": rank,
        "plain": plain["target_accuracy"],
        "chosen": choose(scored, key)["target_accuracy"],
        "chosen_name": f"{choose(scored, key)['candidate']}/e{choose(scored, key)['epoch']}",
        "oracle": max(r["target_accuracy"] for r in scored),
    }


def shift_rows(seeds: dict, last_only: bool = False) -> list:
    """One summary per validator of one shift."""
    out = []
    for validator in VALIDATORS:
        per_seed = [s for s in (seed_result(rows, validator, last_only) for rows in seeds.values()) if s]
        if not per_seed:
            continue
        plain, chosen, oracle = (float(np.mean([s[k] for s in per_seed])) for k in ("plain", "chosen", "oracle"))
        out.append(
            {
                "validator": validator,
                "seeds": len(per_seed),
                "rank": float(np.nanmean([s["rank"] for s in per_seed])),
                "plain": plain,
                "chosen": chosen,
                "oracle": oracle,
                "recovered": (chosen - plain) / (oracle - plain) if oracle > plain else float("nan"),
                "worse": sum(s["chosen"] < s["plain"] for s in per_seed),
                "worse_by_a_point": sum(s["chosen"] < s["plain"] - POINT for s in per_seed),
                "choices": [s["chosen_name"] for s in per_seed],
            }
        )
    return out


def table(runs: dict, last_only: bool = False) -> str:
    lines = [
        "| shift | validator | seeds | rank corr. | plain | chosen | oracle | recovered | worse than plain (by > 1 pt) |"
        " goal |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shift in sorted(runs):
        for r in shift_rows(runs[shift], last_only):
            goal = r["chosen"] >= r["plain"] - POINT and (
                r["oracle"] <= r["plain"] or r["chosen"] - r["plain"] >= 0.5 * (r["oracle"] - r["plain"])
            )
            lines.append(
                f"| {shift} | {r['validator']} | {r['seeds']} | {r['rank']:+.2f} | {r['plain']:.3f} | "
                f"{r['chosen']:.3f} | {r['oracle']:.3f} | {r['recovered']:+.0%} | {r['worse']} ({r['worse_by_a_point']}) "
                f"| {'met' if goal else 'not met'} |"
            )
    return "\n".join(lines)


def summary(runs: dict, last_only: bool = False) -> str:
    """Per validator, over the shifts: the worst mean (chosen - plain), on how many
    shifts that is below -1 point, and the mean share of the oracle's gain recovered."""
    by_validator: dict = defaultdict(list)
    for shift in sorted(runs):
        for r in shift_rows(runs[shift], last_only):
            by_validator[r["validator"]].append(r)
    lines = [
        "| validator | shifts | worst (chosen - plain) | shifts more than 1 pt below plain | mean recovered |",
        "|---|---|---|---|---|",
    ]
    for validator, rows in by_validator.items():
        worst = min(r["chosen"] - r["plain"] for r in rows)
        below = sum(r["chosen"] < r["plain"] - POINT for r in rows)
        recovered = np.nanmean([r["recovered"] for r in rows])
        lines.append(f"| {validator} | {len(rows)} | {worst:+.3f} | {below} | {recovered:+.0%} |")
    return "\n".join(lines)


def choices(runs: dict, last_only: bool = False) -> str:
    lines = ["| shift | validator | chosen checkpoint per seed |", "|---|---|---|"]
    for shift in sorted(runs):
        for r in shift_rows(runs[shift], last_only):
            lines.append(f"| {shift} | {r['validator']} | {', '.join(r['choices'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--choices", action="store_true", help="also which checkpoint each validator chose")
    args = parser.parse_args()
    runs = load(args.folder)
    for last_only, pool in ((False, "every checkpoint"), (True, "the last checkpoints")):
        print(f"### The pool: {pool} of every candidate\n")
        print(table(runs, last_only))
        print()
        print(summary(runs, last_only))
        if args.choices:
            print()
            print(choices(runs, last_only))
        print()


if __name__ == "__main__":
    main()
