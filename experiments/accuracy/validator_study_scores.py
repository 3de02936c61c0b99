"""The validators' scores, re-computed from the study's saved outputs, without training:

    python experiments/accuracy/validator_study_scores.py build-validators

`validator_study.py` saves, per checkpoint, what the validators read of a
model (`outputs/<shift>/seed<seed>/<candidate>/e<epoch>.npz`). This script
scores every checkpoint by every one-model validator (the package's own
classes on those arrays, MixVal from the saved mixtures' predictions) and
caches the scores in `<folder>/scores/<shift>.jsonl` (one line per
checkpoint, keyed by its outputs' path); a checkpoint already scored is
skipped (`--only` scores some validators first; the next run adds the rest),
so adding a validator means adding it to `ONE_MODEL` and running again;
`--again` scores everything anew. Pool-level choices (EnsV, the default rule) read the
outputs directly: `validator_study_table.py`.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import time

import numpy as np

from grad_reverse.adaptation.validation import scores
from grad_reverse.adaptation.validation.validators import (
    DeepEmbeddedValidation,
    InformationMaximization,
    Outputs,
    PredictionEntropy,
    SoftNeighborhoodDensity,
    SourceAccuracy,
    SourceAccuracyAndAlignment,
)


def load_outputs(path: str) -> tuple[Outputs, dict]:
    """The saved checkpoint as the validators' `Outputs`, and the rest of the file."""
    with np.load(path) as f:
        saved = {k: f[k] for k in f.files}
    outputs = Outputs(
        source_features=saved["source_features"].astype(np.float64),
        source_probabilities=saved["source_probabilities"].astype(np.float64),
        source_labels=saved["source_labels"].astype(np.int64),
        target_features=saved["target_features"].astype(np.float64),
        target_probabilities=saved["target_probabilities"].astype(np.float64),
    )
    return outputs, saved


def mixval(outputs: Outputs, saved: dict) -> float:
    return scores.mixed_sample_consistency(
        outputs.target_probabilities,
        saved["mixed_target_probabilities"],
        saved["mix_permutation"],
        float(saved["mix_ratio"]),
    )


ONE_MODEL = {
    "source_accuracy": lambda o, s: SourceAccuracy().score(o),
    "entropy": lambda o, s: PredictionEntropy().score(o),
    "im": lambda o, s: InformationMaximization().score(o),
    "snd": lambda o, s: SoftNeighborhoodDensity().score(o),
    "dev": lambda o, s: DeepEmbeddedValidation().score(o),
    "source_and_alignment": lambda o, s: SourceAccuracyAndAlignment().score(o),
    "bnm": lambda o, s: scores.batch_nuclear_norm(o.target_probabilities),
    "mixval": mixval,
}


def score_folder(
    folder: str, again: bool = False, only: list | None = None, workers: int = 1, shifts: list | None = None
) -> None:
    """Scores every saved checkpoint by `only` (default: every one-model
    validator) where the cache lacks a score, appending to the cache."""
    names = only or list(ONE_MODEL)
    os.makedirs(os.path.join(folder, "scores"), exist_ok=True)
    for path in sorted(glob.glob(os.path.join(folder, "*.jsonl"))):
        shift = os.path.basename(path)[: -len(".jsonl")]
        if shifts and shift not in shifts:
            continue
        cache_path = os.path.join(folder, "scores", f"{shift}.jsonl")
        done: dict = {}
        if os.path.exists(cache_path) and not again:
            with open(cache_path) as f:
                for r in map(json.loads, f):
                    done.setdefault(r["outputs"], set()).update(k[len("val_") :] for k in r if k.startswith("val_"))
        with open(path) as f:
            rows = [r["outputs"] for r in map(json.loads, f) if "outputs" in r]
        todo = [(rel, [n for n in names if n not in done.get(rel, set())]) for rel in rows]
        todo = [(rel, missing) for rel, missing in todo if missing]
        start = time.perf_counter()
        with multiprocessing.Pool(workers) as pool, open(cache_path, "w" if again else "a") as out:
            for row in pool.imap(_score_one, [(folder, rel, missing) for rel, missing in todo]):
                out.write(json.dumps(row) + "\n")
        print(f"{shift}: {len(todo)} checkpoints scored ({time.perf_counter() - start:.0f} s)", flush=True)


def _score_one(job: tuple) -> dict:
    folder, rel, names = job
    outputs, saved = load_outputs(os.path.join(folder, rel))
    row = {"outputs": rel, "n_source": len(outputs.source_labels)}
    row.update({f"val_{name}": float(ONE_MODEL[name](outputs, saved)) for name in names})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--again", action="store_true", help="score every checkpoint again")
    parser.add_argument("--only", help="comma-separated validators (default: all of ONE_MODEL)")
    parser.add_argument("--workers", type=int, default=1, help="processes scoring at once")
    parser.add_argument("--shifts", help="comma-separated shifts (default: every one in the folder)")
    args = parser.parse_args()
    only, shifts = (a.split(",") if a else None for a in (args.only, args.shifts))
    score_folder(args.folder, args.again, only, args.workers, shifts)


if __name__ == "__main__":
    main()
