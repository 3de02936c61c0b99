"""The data of the moons demo: two labeled moons (source) and an independent
sample of them rotated by 35 degrees (target). numpy only."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

POINTS_PER_MOON = 150
MOON_NOISE = 0.05
ROTATION_DEGREES = 35.0

# sklearn's moons (outer: angle t, inner: 1 - cos t, 0.5 - sin t) have their
# centre of mass here for uniform angles; centring and doubling as the
# paper's code did puts the data at the origin at unit scale.
_MOONS_CENTRE = np.array([0.5, 0.25])
_MOONS_SCALE = 2.0


class MoonsDomains(NamedTuple):
    """Source (labeled in training) and target (labels only for evaluation)."""

    x_source: np.ndarray
    y_source: np.ndarray
    x_target: np.ndarray
    y_target: np.ndarray


def make_moons(n_per_class: int, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles, centred at the origin, x2 scale.

    Returns `(x, y)`: `x` float32 `[2 * n_per_class, 2]`, `y` float32 0/1,
    class 0 (the upper moon) first. Angles are drawn uniformly from [0, pi]
    and Gaussian noise of std `noise` (before scaling) is added.
    """
    t_outer = rng.uniform(0.0, math.pi, n_per_class)
    t_inner = rng.uniform(0.0, math.pi, n_per_class)
    outer = np.stack([np.cos(t_outer), np.sin(t_outer)], axis=1)
    inner = np.stack([1.0 - np.cos(t_inner), 0.5 - np.sin(t_inner)], axis=1)
    x = np.concatenate([outer, inner]) + rng.normal(0.0, noise, (2 * n_per_class, 2))
    x = _MOONS_SCALE * (x - _MOONS_CENTRE)
    y = np.concatenate([np.zeros(n_per_class), np.ones(n_per_class)])
    return x.astype(np.float32), y.astype(np.float32)


def rotate(x: np.ndarray, degrees: float) -> np.ndarray:
    """Rotates 2-D points counter-clockwise about the origin (the moons' centre)."""
    a = math.radians(degrees)
    rotation = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return (x @ rotation.T).astype(x.dtype)


def make_domains(
    seed: int,
    n_per_class: int = POINTS_PER_MOON,
    noise: float = MOON_NOISE,
    degrees: float = ROTATION_DEGREES,
) -> MoonsDomains:
    """Source moons and an independent sample of them rotated by `degrees`, seeded."""
    rng = np.random.default_rng(seed)
    x_source, y_source = make_moons(n_per_class, noise, rng)
    x_target, y_target = make_moons(n_per_class, noise, rng)
    return MoonsDomains(x_source, y_source, rotate(x_target, degrees), y_target)
