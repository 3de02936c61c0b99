"""The table of `combine_and_teach.py`'s rows, per shift and way:

    python experiments/accuracy/combine_and_teach_table.py build-validators

Per shift and way (plain, the default choice, the gated ensemble, the mean
of every candidate, each student recipe, the oracle): the mean target
accuracy over the seeds; the share of the oracle's gain it recovers ((way -
plain) / (oracle - plain), of the means); the share of the plain-to-ceiling
gap it closes (the ceiling: the plain network trained on half the target's
labels, `validator_study.py`'s `target_trained` rows); its worst seed
against the plain network; on how many seeds it is more than 2 points below.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from collections import defaultdict

import numpy as np

FIXED = ("plain", "default", "ensemble", "all_mean")


def load(folder: str) -> tuple[dict, dict]:
    """`({shift: [rows by seed]}, {shift: {seed: ceiling}})`; a seed run twice keeps its last row."""
    rows: dict = defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(folder, "teach", "*.jsonl"))):
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                rows[row["shift"]][row["seed"]] = row
    ceilings: dict = defaultdict(dict)
    for shift in rows:
        study = os.path.join(folder, f"{shift}.jsonl")
        if os.path.exists(study):
            with open(study) as f:
                for line in f:
                    row = json.loads(line)
                    if row["candidate"] == "target_trained":
                        ceilings[shift][row["seed"]] = row["target_accuracy"]
    return {s: [r[k] for k in sorted(r)] for s, r in rows.items()}, ceilings


def ways(rows: list) -> list:
    students = sorted({k for r in rows for k in r if k.startswith("student")}, key=lambda k: (k != "student", k))
    return [*FIXED, *students, "oracle"]


def shift_table(shift: str, rows: list, ceilings: dict) -> list:
    plain = np.array([r["plain"] for r in rows])
    oracle = float(np.mean([r["oracle"] for r in rows]))
    seeds = [r["seed"] for r in rows]
    ceiling = float(np.mean([ceilings[s] for s in seeds])) if all(s in ceilings for s in seeds) else float("nan")
    lines = []
    for way in ways(rows):
        if not all(way in r for r in rows):
            continue
        values = np.array([r[way] for r in rows])
        mean = float(values.mean())
        oracle_share = (mean - plain.mean()) / (oracle - plain.mean()) if oracle > plain.mean() else float("nan")
        gap_share = (mean - plain.mean()) / (ceiling - plain.mean()) if ceiling > plain.mean() else float("nan")
        worst = float((values - plain).min())
        below = int(np.sum(values < plain - 0.02))
        lines.append(
            f"| {shift} | {way} | {len(rows)} | {mean:.3f} | {oracle_share:+.0%} | {gap_share:+.0%} | "
            f"{worst:+.3f} | {below} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    args = parser.parse_args()
    runs, ceilings = load(args.folder)
    print(
        "| shift | way | seeds | target accuracy | of the oracle's gain | of the gap to the ceiling | worst seed vs plain | seeds > 2 points below plain |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for shift in sorted(runs):
        print("\n".join(shift_table(shift, runs[shift], ceilings.get(shift, {}))))


if __name__ == "__main__":
    main()
