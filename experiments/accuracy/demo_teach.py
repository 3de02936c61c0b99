"""The demo's moons, combined and taught: per seed, the demo's plain network and
DANN (3,000 steps each), `select_without_labels`' gated ensemble of the two,
and a `Student` of the demo's networks taught from that ensemble for each
recipe given (docs/results/validators.md, "Combine, then teach").

    python experiments/accuracy/demo_teach.py 0,1,2 default 0.9:1.0:0.0

A recipe `c:e:s` is `Student(confidence=c, entropy_weight=e, source_weight=s)`;
`default` is the package's.
"""

from __future__ import annotations

import sys

import numpy as np

from grad_reverse.adaptation import Student, select_without_labels
from grad_reverse.demo import label_free, models, training
from grad_reverse.demo.data import make_domains

RECIPE_KEYS = ("confidence", "entropy_weight", "source_weight")
STEPS = 3000


def target_accuracy(model: object, domains: object) -> float:
    p = np.asarray(model.predict(domains.x_target, verbose=0))[:, 0]
    return float(np.mean((p > 0.5) == domains.y_target.reshape(-1)))


def run(seed: int, recipes: list) -> str:
    domains = make_domains(seed)
    held_out = make_domains(seed + label_free.HELD_OUT_SEED)
    plain = training.train_plain(domains, seed, STEPS)
    dann = training.train_dann(domains, seed, STEPS)
    chosen = select_without_labels(
        {"plain": plain, "dann": dann}, held_out.x_source, held_out.y_source, domains.x_target
    )
    out = [
        f"seed {seed}: plain {target_accuracy(plain, domains):.3f} dann {target_accuracy(dann, domains):.3f} "
        f"ens {target_accuracy(chosen.ensemble, domains):.3f} members {chosen.ensemble_members}"
    ]
    for recipe in recipes:
        values = {} if recipe == "default" else dict(zip(RECIPE_KEYS, map(float, recipe.split(":"))))
        fresh = models.build_dann(seed + 1, lambda_max=1.0, gamma=10.0)  # only its two networks are used
        student = Student(fresh.feature_extractor, fresh.label_head, chosen.ensemble, **values)
        student.compile(training.optimizer(), "binary_crossentropy")
        student.fit(
            domains.x_source,
            domains.y_source,
            target=domains.x_target,
            batch_size=2 * training.BATCH_PER_DOMAIN,
            epochs=1,
            steps_per_epoch=STEPS,
            seed=seed,
            verbose=0,
        )
        out.append(f"student[{recipe}] {target_accuracy(student, domains):.3f}")
    return " ".join(out)


def main() -> None:
    for seed in map(int, sys.argv[1].split(",")):
        print(run(seed, sys.argv[2:]), flush=True)


if __name__ == "__main__":
    main()
