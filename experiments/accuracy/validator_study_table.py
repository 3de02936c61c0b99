"""The validators' study's tables, from the files `validator_study.py` saved:

    python experiments/accuracy/validator_study_scores.py build-validators   # once: the one-model scores
    python experiments/accuracy/validator_study_table.py build-validators [--choices] [--shifts a,b]

Per shift and way of choosing, over the seeds, two pools: each candidate's
last checkpoint (the method and lambda: what `select_without_labels` is
given), and every checkpoint of every candidate (the epoch too).

* one-model validators (`validator_study_scores.ONE_MODEL`): the pool's
  highest score; a tie goes to the plain network, then the later checkpoint;
* `ensv`: EnsV over the whole pool (each checkpoint's agreement with the
  pool's averaged target predictions);
* `gated_mixval`: the package's rule (`grad_reverse.adaptation.validation.rule`:
  the held-out source gate, then MixVal among the gated), on the saved outputs;
  the name `select_without_labels(validator_name=...)` takes;
* `gated_<v>` for another `v`: the same gate, then validator `v` among the
  gated (considered while choosing the rule; the study's only, not a name
  the package accepts).

Columns: rank corr. (Spearman, score vs target accuracy over a seed's pool,
mean over seeds; one-model validators only); plain (the plain network's last
checkpoint); chosen; oracle (the pool's best: labels needed); ceiling (the
plain network trained on half the target's labels, tested on the other
half); recovered = (chosen - plain) / (oracle - plain) of the means; worst =
on how many seeds the choice was the pool's worst checkpoint; worse = on how
many seeds the choice is below the plain network (> 1 point below).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from collections import defaultdict
from functools import lru_cache

import numpy as np
from scipy.stats import spearmanr
from validator_study_scores import ONE_MODEL

from grad_reverse.adaptation.validation import rule, scores

POINT = 0.01
GATED = ("ensv", "entropy", "im", "snd", "dev", "source_and_alignment", "bnm", "borda")
BORDA = ("ensv", "mixval", "im", "source_and_alignment")


def load(folder: str) -> tuple[dict, dict]:
    """`({shift: {seed: [rows]}}, {shift: {seed: ceiling}})`, each row with its cached scores."""
    runs: dict = defaultdict(lambda: defaultdict(list))
    ceilings: dict = defaultdict(dict)
    cached: dict = {}
    for path in glob.glob(os.path.join(folder, "scores", "*.jsonl")):
        with open(path) as f:
            for r in map(json.loads, f):  # a checkpoint's scores may come in several lines
                cached.setdefault(r["outputs"], {}).update(r)
    for path in sorted(glob.glob(os.path.join(folder, "*.jsonl"))):
        with open(path) as f:
            for row in map(json.loads, f):
                if row["candidate"] == "target_trained":
                    ceilings[row["shift"]][row["seed"]] = row["target_accuracy"]
                    continue
                row.update(cached.get(row.get("outputs"), {}))
                row["folder"] = folder
                runs[row["shift"]][row["seed"]].append(row)
    for seeds in runs.values():  # a seed still training, or not yet scored, is left out
        for seed in [s for s, rows in seeds.items() if not complete(rows)]:
            del seeds[seed]
    return runs, ceilings


CANDIDATES = 13  # the plain network, and DANN, CDAN, CDAN+E, MDD at three lambdas (validator_study.candidates)


def complete(rows: list) -> bool:
    candidates = {r["candidate"] for r in rows}
    return (
        len(candidates) == CANDIDATES
        and len(rows) == CANDIDATES * last_epoch(rows)
        and all("val_source_accuracy" in r for r in rows)
    )


@lru_cache(maxsize=4096)
def target_probabilities(folder: str, rel: str) -> np.ndarray:
    with np.load(os.path.join(folder, rel)) as f:
        return f["target_probabilities"].astype(np.float64)


def last_epoch(rows: list) -> int:
    return max(r["epoch"] for r in rows)


def pool_of(rows: list, last_only: bool) -> list:
    return [r for r in rows if not last_only or r["epoch"] == last_epoch(rows)]


def plain_row(rows: list) -> dict:
    return next(r for r in rows if r["candidate"] == "plain" and r["epoch"] == last_epoch(rows))


def key(r: dict) -> str:
    return f"{r['candidate']}/e{r['epoch']}"


def by_score(pool: list, values: dict) -> dict:
    """The row with the highest value; a tie goes to the plain network, then the later checkpoint."""
    best = max(values[key(r)] for r in pool if not np.isnan(values[key(r)]))
    tied = [r for r in pool if values[key(r)] == best]
    return min(tied, key=lambda r: (r["candidate"] != "plain", -r["epoch"]))


def gate(pool: list, plain: dict) -> list:
    floor = plain["val_source_accuracy"] - rule.gate_margin(plain["val_source_accuracy"], plain["n_source"])
    return [r for r in pool if r is plain or r["val_source_accuracy"] >= floor]


def choose(pool: list, plain: dict, how: str) -> tuple[dict, dict | None]:
    """`(chosen row, {key: score} or None)`."""
    if how in ONE_MODEL:
        values = {key(r): r[f"val_{how}"] for r in pool}
        return by_score(pool, values), values
    if how == "ensv":
        agreement = scores.ensemble_agreement([target_probabilities(r["folder"], r["outputs"]) for r in pool])
        values = dict(zip(map(key, pool), agreement))
        return by_score(pool, values), values
    if how == rule.NAME:  # the package's own rule ("gated_mixval"), MixVal read from the saved mixtures' scores
        names = {key(r): r for r in pool}
        chosen, _ = rule.choose(
            {k: r["val_source_accuracy"] for k, r in names.items()},
            lambda gated: {k: names[k]["val_mixval"] for k in gated},
            plain["n_source"],
            key(plain),
        )
        return names[chosen], None
    if how == "borda":  # the mean rank of several scores (0: the best)
        ranks = []
        for part in BORDA:
            _, values = choose(pool, plain, part)
            order = sorted(pool, key=lambda r: -values[key(r)])
            ranks.append({key(r): i for i, r in enumerate(order)})
        values = {key(r): -float(np.mean([rk[key(r)] for rk in ranks])) for r in pool}
        return by_score(pool, values), values
    if how.startswith("gated_"):
        inner = gate(pool, plain)
        chosen, values = choose(inner, plain, how[len("gated_") :])
        return chosen, None
    raise ValueError(how)


def seed_result(rows: list, how: str, last_only: bool) -> dict:
    pool = pool_of(rows, last_only)
    plain = plain_row(rows)
    if plain not in pool:
        pool = pool + [plain]
    chosen, values = choose(pool, plain, how)
    accuracies = [r["target_accuracy"] for r in pool]
    rank = float("nan")
    if values is not None and len(set(values.values())) > 1:
        rank = spearmanr([values[key(r)] for r in pool], accuracies).statistic
    return {
        "rank": rank,
        "plain": plain["target_accuracy"],
        "chosen": chosen["target_accuracy"],
        "chosen_name": key(chosen),
        "oracle": max(accuracies),
        "worst": chosen["target_accuracy"] == min(accuracies),
    }


def ways() -> list:
    return list(ONE_MODEL) + ["ensv"] + [f"gated_{v}" for v in GATED] + [rule.NAME]


def needs(how: str) -> list:
    """The cached scores a way of choosing reads."""
    if how in ONE_MODEL:
        return [f"val_{how}"]
    if how == "borda":
        return [f"val_{v}" for v in BORDA if v != "ensv"]
    if how == rule.NAME:  # before the other gated_<v>: the package's rule reads the cached MixVal
        return ["val_source_accuracy", "val_mixval"]
    if how.startswith("gated_"):
        return ["val_source_accuracy"] + needs(how[len("gated_") :])
    return ["val_source_accuracy"]


def shift_rows(seeds: dict, ceilings: dict, last_only: bool) -> list:
    out = []
    for how in ways():
        if not all(k in r for rows in seeds.values() for r in rows for k in needs(how)):
            continue  # not scored yet (validator_study_scores.py --only)
        per_seed = [seed_result(rows, how, last_only) for rows in seeds.values()]
        if not per_seed:
            continue
        plain, chosen, oracle = (float(np.mean([s[k] for s in per_seed])) for k in ("plain", "chosen", "oracle"))
        out.append(
            {
                "how": how,
                "seeds": len(per_seed),
                "rank": float(np.nanmean([s["rank"] for s in per_seed])) if how in ONE_MODEL else float("nan"),
                "plain": plain,
                "chosen": chosen,
                "oracle": oracle,
                "ceiling": float(np.mean(list(ceilings.values()))) if ceilings else float("nan"),
                "recovered": (chosen - plain) / (oracle - plain) if oracle > plain else float("nan"),
                "worst": sum(s["worst"] for s in per_seed),
                "worse": sum(s["chosen"] < s["plain"] for s in per_seed),
                "worse_by_a_point": sum(s["chosen"] < s["plain"] - POINT for s in per_seed),
                "choices": [s["chosen_name"] for s in per_seed],
            }
        )
    return out


def goal(r: dict) -> bool:
    return r["chosen"] >= r["plain"] - POINT and (
        r["oracle"] <= r["plain"] or r["chosen"] - r["plain"] >= 0.5 * (r["oracle"] - r["plain"])
    )


def table(results: dict) -> str:
    lines = [
        "| shift | choice | seeds | rank corr. | plain | chosen | oracle | ceiling | recovered | worst | "
        "worse than plain (by > 1 pt) | goal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shift, rows in results.items():
        for r in rows:
            rank = "" if np.isnan(r["rank"]) else f"{r['rank']:+.2f}"
            lines.append(
                f"| {shift} | {r['how']} | {r['seeds']} | {rank} | {r['plain']:.3f} | {r['chosen']:.3f} | "
                f"{r['oracle']:.3f} | {r['ceiling']:.3f} | {r['recovered']:+.0%} | {r['worst']} | "
                f"{r['worse']} ({r['worse_by_a_point']}) | {'met' if goal(r) else 'not met'} |"
            )
    return "\n".join(lines)


def summary(results: dict) -> str:
    """Per way of choosing, over the shifts: the worst mean (chosen - plain), on
    how many shifts that is below -1 point, the mean share of the oracle's gain
    recovered, and how often a seed's choice was its pool's worst."""
    by_how: dict = defaultdict(list)
    for rows in results.values():
        for r in rows:
            by_how[r["how"]].append(r)
    lines = [
        "| choice | shifts | worst (chosen - plain) | shifts > 1 pt below plain | mean recovered | "
        "seeds choosing the pool's worst |",
        "|---|---|---|---|---|---|",
    ]
    for how, rows in by_how.items():
        worst = min(r["chosen"] - r["plain"] for r in rows)
        below = sum(r["chosen"] < r["plain"] - POINT for r in rows)
        recovered = np.nanmean([r["recovered"] for r in rows])
        worst_picks = sum(r["worst"] for r in rows)
        seeds = sum(r["seeds"] for r in rows)
        lines.append(f"| {how} | {len(rows)} | {worst:+.3f} | {below} | {recovered:+.0%} | {worst_picks} of {seeds} |")
    return "\n".join(lines)


def choices(results: dict) -> str:
    lines = ["| shift | choice | chosen checkpoint per seed |", "|---|---|---|"]
    for shift, rows in results.items():
        for r in rows:
            lines.append(f"| {shift} | {r['how']} | {', '.join(r['choices'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--choices", action="store_true", help="also which checkpoint each way chose")
    parser.add_argument("--shifts", help="comma-separated shifts (default: all in the folder)")
    args = parser.parse_args()
    runs, ceilings = load(args.folder)
    shifts = [s for s in (args.shifts.split(",") if args.shifts else sorted(runs)) if runs[s]]
    for last_only, pool in ((True, "the last checkpoints"), (False, "every checkpoint")):
        results = {s: shift_rows(runs[s], ceilings.get(s, {}), last_only) for s in shifts}
        print(f"### The pool: {pool} of every candidate\n")
        print(summary(results))
        print()
        print(table(results))
        if args.choices:
            print()
            print(choices(results))
        print()


if __name__ == "__main__":
    main()
