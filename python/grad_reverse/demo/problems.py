"""The problems `demo --problem` runs: generated data (`demo.method_runs`), and
one image problem read from files a system package installs (`demo.image_runs`).

* `moons`: the paper's inter-twinning moons (§5.1.1), the target rotated 35°
  (`demo.data.make_domains`), two classes.
* `blobs`: three Gaussian classes on a circle (angles 90°, 210°, 330°,
  radius 2, standard deviation 0.6), balanced in the source; the target is
  rotated by 45° and its classes come in proportions 0.5 / 0.3 / 0.2. The
  rotation is what adaptation can undo: a plain network sees the
  target's classes 15° from its boundaries. The label shift is what DANN
  cannot: the source marginal puts a third of its mass on each class, the
  target's half on class 0, so a feature map that makes the two marginals
  equal (DANN's domain head cannot tell them apart) must send part of the
  target's class 0 into the regions of the source's classes 1 and 2, where
  the label head calls them 1 or 2. CDAN's domain head sees the features
  together with the predicted class, so it is the per-class feature
  distributions it pulls together. docs/methods.md has what each method
  measured on it.
* `fashion-mnist-m`: Fashion-MNIST's images, grey, against the same images
  blended with photograph patches as MNIST-M was (`demo.image_runs`); ten
  classes. Its data is no part of the package (`demo.fashion_mnist` says where
  it is looked for), so it is not in `PROBLEMS`, the generated ones.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from grad_reverse.demo.data import ROTATION_DEGREES, make_domains, rotate

BLOB_ANGLES = (90.0, 210.0, 330.0)
BLOB_RADIUS, BLOB_STD = 2.0, 0.6
BLOB_ROTATION = 45.0
BLOB_SOURCE_PER_CLASS = 200
BLOB_TARGET_PROPORTIONS = (0.5, 0.3, 0.2)
BLOB_TARGET_POINTS = 600


class Problem(NamedTuple):
    name: str
    classes: int  # 2: one sigmoid unit
    x_source: np.ndarray
    y_source: np.ndarray
    x_target: np.ndarray
    y_target: np.ndarray


def _blob_sample(counts: tuple, rng: np.random.Generator) -> tuple:
    xs, ys = [], []
    for label, (count, angle) in enumerate(zip(counts, BLOB_ANGLES)):
        centre = BLOB_RADIUS * np.array([math.cos(math.radians(angle)), math.sin(math.radians(angle))])
        xs.append(centre + BLOB_STD * rng.standard_normal((count, 2)))
        ys.append(np.full(count, label))
    return np.concatenate(xs).astype("float32"), np.concatenate(ys).astype("int32")


def blobs(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    x_source, y_source = _blob_sample((BLOB_SOURCE_PER_CLASS,) * 3, rng)
    counts = tuple(int(round(p * BLOB_TARGET_POINTS)) for p in BLOB_TARGET_PROPORTIONS)
    x_target, y_target = _blob_sample(counts, rng)
    return Problem("blobs", 3, x_source, y_source, rotate(x_target, BLOB_ROTATION), y_target)


def moons(seed: int) -> Problem:
    d = make_domains(seed)
    return Problem(
        "moons",
        2,
        d.x_source,
        d.y_source.reshape(-1, 1).astype("float32"),
        d.x_target,
        d.y_target.reshape(-1).astype("int32"),
    )


PROBLEMS = {"moons": moons, "blobs": blobs}
IMAGE_PROBLEMS = ("fashion-mnist-m",)
CHOICES = tuple(PROBLEMS) + IMAGE_PROBLEMS  # what `demo --problem` accepts

# What each problem shows, as the demo's exit status checks it: pairs
# (better, worse) of methods whose mean target accuracy must come in that
# order when both were run. On the moons DANN, CDAN and CDAN+E beat
# the plain network; MDD did not in any setting tried (docs/methods.md's table), so
# no claim is made for it there. Blobs is built for DANN to lose to its label
# shift, so there it is CDAN that must beat DANN, and CDAN and CDAN+E
# the plain network. MDD's mean beat the plain network's on blobs on three CPU paths of
# four (by 0.026 to 0.044) and lost on the fourth (by 0.022, one seed at
# 0.435: an AMD EPYC under ONEDNN_MAX_CPU_ISA=AVX2), so no claim is made for
# it there either.
CLAIMS = {
    "moons": (("dann", "plain"), ("cdan", "plain"), ("cdan_e", "plain")),
    "blobs": (("cdan", "dann"), ("cdan", "plain"), ("cdan_e", "plain")),
}
# What a comparison's reader should expect of each problem, printed under its
# table, so that a method losing by design does not read as a failure.
EXPECTED = {
    "moons": "the moons are DANN's problem: DANN, CDAN and CDAN+E are expected above the plain network; "
    "MDD is not (it was not in any setting tried)",
    "blobs": "blobs has label shift (the target holds the classes in other proportions): DANN, which aligns "
    "the domains' features as a whole, is meant to lose to the plain network here; CDAN, conditioned on the "
    "predicted class, is expected above both",
}


def expectation(problem: str, methods: list) -> str:
    """What to expect on `problem`, and which orderings of the methods that ran the exit status checks."""
    checked = [f"{better} > {worse}" for better, worse in CLAIMS.get(problem, ()) if {better, worse} <= set(methods)]
    lines = [f"What to expect: {EXPECTED[problem]}."] if problem in EXPECTED else []
    if checked:
        lines.append(f"Checked (mean target accuracy; exit status 1 if not): {', '.join(checked)}.")
    return "\n".join(lines)


# The seeds a comparison runs without --seed. Blobs takes ten: over three, one
# seed that trains badly on a CPU's rounding path (CDAN 0.568 on an AVX2
# machine's seed 1) moves a mean by 0.1, and the claims above failed on two
# of three CPU paths measured; over ten they held on every one of four
# (docs/demo.md).
DEFAULT_SEEDS = {"moons": (0, 1, 2), "blobs": tuple(range(10)), "fashion-mnist-m": (0, 1, 2)}
# The pictures' headings: what the target is.
TITLES = {
    "moons": f"Inter-twinning moons (Ganin et al. 2016, §5.1.1): target = source rotated {ROTATION_DEGREES:g}°",
    "blobs": f"Three blobs: target = source rotated {BLOB_ROTATION:g}°, class proportions "
    + " / ".join(f"{p:g}" for p in BLOB_TARGET_PROPORTIONS),
    "fashion-mnist-m": "Fashion-MNIST -> Fashion-MNIST-M: target = |image - photograph patch| per channel "
    "(MNIST-M's recipe)",
}
