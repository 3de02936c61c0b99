"""Where CDAN's and CDAN+E's gap to ADAPT's own on ADAPT's "Two moons" comes from: this
package's CDAN trained with ADAPT 0.4.5's gradient structure, then with one difference at a time
put back. The numbers behind docs/methods.md's "On a peer's own problem" attribution.

    python experiments/accuracy/two_moons_adapt_cdan_paths.py [--seeds 0-9] [--configs cdan:adapt,...]
    python experiments/accuracy/two_moons_adapt_cdan_paths.py --check-adapt-step   # needs ADAPT

The problem, networks, optimizer, batches and steps are `two_moons_adapt.py`'s (ADAPT's
notebook's). A scratch subclass of `grad_reverse.CDAN` (not part of the package) adds three
switches that the package's CDAN does not have:

* `head_map`, `head_entropy`: whether the label head's weights receive the reversed domain
  gradient that passes through the map's class probabilities `g` (with `map_gradient=True`) and
  through CDAN+E's entropy weights. ADAPT's label head ("task") is updated from the label loss
  alone; its encoder is differentiated through the label head on both paths. Off, a path's `g`
  is the label head applied with its weights held constant (`stateless_call` on stop-gradient
  weights), so the gradient still reaches the features through the head but not its weights.
* `normalizer_gradient`: CDAN+E's per-domain normalizers `sum w` differentiated (ADAPT divides
  the weights by their mean without a stop-gradient) or detached (the authors' `.detach()`,
  the package's).

and `adapt_domain_loss`: the domain loss as ADAPT writes it, `-log(p + eps)` with float32's
eps and the domain head's output read as P(source), instead of Keras' binary cross-entropy
(which clips `p` to [1e-7, 1 - 1e-7]) on P(target). With it, one training step from the same
weights on the same batch gives ADAPT's own CDAN's update (`--check-adapt-step`: SGD at rate 1,
each part's largest relative difference; ADAPT's map holds the same values in another order,
which the check bridges by reordering the domain head's first kernel).

Configurations (`CONFIGS`): `adapt` is ADAPT's structure as a whole: `map_gradient=True`,
the label head on the label loss only, lambda 1 from the first step, ADAPT's term scale (plain
CDAN: the sum of the two domains' means; CDAN+E: half that, normalized by the weights' means
with their gradient), ADAPT's domain loss. Each `adapt+...` / `adapt-...` changes one of those
back towards the package's defaults as they were when docs/methods.md's table was measured
(`map_gradient=False` then); `default` is the package's defaults and `default-head` the defaults
with the label head kept from the entropy weights' gradient (the table's "defaults" rows: with
`map_gradient=False`; the default is True since).

TensorFlow runs on one thread. One line per seed, then each configuration's target accuracy
min / mean / max over the seeds.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from dann_moons_seeds import seed_range  # noqa: E402
from two_moons_adapt import (  # noqa: E402
    ADAPT_INSTALL,
    BATCH_PER_DOMAIN,
    EPOCHS,
    STEPS_PER_EPOCH,
    domain_head,
    encoder,
    label_head,
    make_moons_rotated,
    optimizer,
    run_over_seeds,
    target_accuracy,
)

from grad_reverse import CDAN  # noqa: E402
from grad_reverse._tools import keras  # noqa: E402
from grad_reverse.adaptation.cdan import entropy_weights, weighted_domain_term  # noqa: E402
from grad_reverse.adaptation.domain_head import MEAN_OVER_DOMAINS, domain_term  # noqa: E402
from grad_reverse.adaptation.model import class_log_probabilities  # noqa: E402

ADAPT_EPS = float(np.finfo(np.float32).eps)  # ADAPT's EPS in its CDAN


class PathsCDAN(CDAN):
    """`CDAN` with the label head's adversarial paths and CDAN+E's normalizer gradient switchable."""

    def __init__(self, *args, head_map=True, head_entropy=True, normalizer_gradient=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.head_map, self.head_entropy, self.normalizer_gradient = head_map, head_entropy, normalizer_gradient

    def _probabilities(self, y):
        log_p = class_log_probabilities(self.METHOD, y, self._label_from_logits, self._label_activation)
        return tf.exp(log_p)

    def _constant_head_probabilities(self, features):
        """The label head's probabilities with its weights held constant: gradient reaches `features` only."""
        head = self.label_head
        weights = [tf.stop_gradient(tf.convert_to_tensor(v)) for v in head.trainable_variables]
        others = [tf.convert_to_tensor(v) for v in head.non_trainable_variables]
        y, _ = head.stateless_call(weights, others, features, training=True)
        return self._probabilities(y)

    def _adversarial_step(self, features, n_source, lambda_):
        y_all = self.label_head(features, training=True)
        probabilities = self._probabilities(y_all)
        constant = None if (self.head_map and self.head_entropy) else self._constant_head_probabilities(features)
        if self.map_gradient:
            conditioning = probabilities if self.head_map else constant
        else:
            conditioning = tf.stop_gradient(probabilities)
        mapped = self.conditioning_map(self._features_2d(features), conditioning)
        domain_pred = self._domain_prediction(mapped, lambda_)
        per_point, domain_accuracy = self._domain_losses(domain_pred, n_source)
        reduction = self._domain_loss_reduction
        if not self.entropy_conditioning:
            domain_loss = domain_term(per_point, n_source, reduction)
        else:
            weights = entropy_weights(probabilities if self.head_entropy else constant, lambda_)
            if self.normalizer_gradient:
                domain_loss = adapt_weighted_term(per_point, weights, n_source, reduction)
            else:
                domain_loss = weighted_domain_term(per_point, weights, n_source, reduction)
        return y_all[:n_source], domain_loss, {"domain_loss": domain_loss, "domain_accuracy": domain_accuracy}


def adapt_weighted_term(per_point, weights, n_source, reduction):
    """ADAPT's CDAN+E term: each domain's weights divided by their mean (with its gradient)."""
    weights = tf.reshape(weights, [-1])

    def weighted_mean(w, losses):
        return tf.reduce_mean(w / (tf.reduce_mean(w) + ADAPT_EPS) * losses)

    both = weighted_mean(weights[:n_source], per_point[:n_source]) + weighted_mean(
        weights[n_source:], per_point[n_source:]
    )
    return 0.5 * both if reduction == MEAN_OVER_DOMAINS else both


def adapt_domain_loss(domain_true, domain_pred):
    """ADAPT's per-point domain loss, with ADAPT's labels: the domain head's output is P(source)
    (`-log(p + eps)` for a source point, `-log(1 - p + eps)` for a target point), where the
    package's is P(target) (`domain_true` 1 on the target points). The logged domain accuracy is
    then one minus the head's."""
    p = tf.reshape(domain_pred, [-1])
    is_source = 1.0 - tf.reshape(domain_true, [-1])
    return -(is_source * tf.math.log(p + ADAPT_EPS) + (1.0 - is_source) * tf.math.log(1.0 - p + ADAPT_EPS))


# ADAPT's structure, per method: constructor switches, compile switches.
ADAPT = {
    "cdan": (
        dict(map_gradient=True, head_map=False, head_entropy=False, lambda_schedule="constant"),
        dict(domain_loss_reduction="sum_over_domains", adapt_loss=True),
    ),
    "cdan_e": (
        dict(
            map_gradient=True, head_map=False, head_entropy=False, normalizer_gradient=True, lambda_schedule="constant"
        ),
        dict(domain_loss_reduction="mean_over_domains", adapt_loss=True),
    ),
}
# One difference at a time, back towards the package's defaults: (constructor, compile) overrides.
CHANGES = {
    "adapt": ({}, {}),
    "adapt+head_map": (dict(head_map=True), {}),
    "adapt+head_entropy": (dict(head_entropy=True), {}),
    "adapt+head_both": (dict(head_map=True, head_entropy=True), {}),
    "adapt-map_gradient": (dict(map_gradient=False), {}),
    "adapt-constant": (dict(lambda_schedule="paper"), {}),
    "adapt-scale": ({}, "other"),
    "adapt-normalizer_gradient": (dict(normalizer_gradient=False), {}),
    "adapt-domain_loss": ({}, dict(adapt_loss=False)),
    "default": (None, None),
    "default-head": (dict(head_entropy=False), None),
}
ENTROPY_ONLY = ("adapt+head_entropy", "adapt-normalizer_gradient", "default-head")  # no entropy weights in CDAN
CONFIGS = [f"{m}:{c}" for m in ADAPT for c in CHANGES if m == "cdan_e" or c not in ENTROPY_ONLY]


def arguments(method: str, change: str) -> tuple:
    constructor_change, compile_change = CHANGES[change]
    if compile_change is None:  # from the package's defaults
        return dict(constructor_change or {}), {}
    constructor, compile_arguments = dict(ADAPT[method][0]), dict(ADAPT[method][1])
    constructor.update(constructor_change)
    if compile_change == "other":
        reduction = compile_arguments["domain_loss_reduction"]
        compile_arguments["domain_loss_reduction"] = (
            "mean_over_domains" if reduction == "sum_over_domains" else "sum_over_domains"
        )
    else:
        compile_arguments.update(compile_change)
    return constructor, compile_arguments


def train(config: str, data: tuple, seed: int, epochs: int) -> float:
    method, change = config.split(":")
    x_source, y_source, x_target, y_target = data
    constructor, compile_arguments = arguments(method, change)
    keras.utils.set_random_seed(seed)
    model = PathsCDAN(encoder(), label_head(2), domain_head(20), entropy_conditioning=method == "cdan_e", **constructor)
    if compile_arguments.pop("adapt_loss", False):
        compile_arguments["domain_loss"] = adapt_domain_loss
    model.compile(optimizer=optimizer(), loss="sparse_categorical_crossentropy", **compile_arguments)
    model.fit(
        x_source,
        y_source,
        target=x_target,
        seed=seed,
        verbose=0,
        epochs=epochs,
        steps_per_epoch=STEPS_PER_EPOCH,
        batch_size=2 * BATCH_PER_DOMAIN,
    )
    return target_accuracy(model.predict(x_target, verbose=0), y_target)


def check_adapt_step(data: tuple) -> None:
    """One training step of each configuration below from the same weights on the same batch
    (34 + 34 points, SGD at rate 1) against ADAPT's own CDAN's step: the largest relative
    difference of each part's update. Needs ADAPT 0.4.5."""
    try:
        from adapt.feature_based import CDAN as AdaptCDAN
    except ImportError as error:
        sys.exit(f"--check-adapt-step needs ADAPT 0.4.5 ({error}); install it with: {ADAPT_INSTALL}")
    x_source, y_source, x_target, _ = data
    n = BATCH_PER_DOMAIN
    xs, ys, xt = x_source[:n], y_source[:n], x_target[n : 2 * n]
    # ADAPT's map is feature-major (entry j * classes + c), ours class-major (c * features + j).
    order = [c * 10 + j for j in range(10) for c in range(2)]
    for config in ("cdan:adapt", "cdan:adapt+head_map", "cdan_e:adapt", "cdan_e:adapt+head_both"):
        method, change = config.split(":")
        keras.utils.set_random_seed(1)
        parts = [encoder(), label_head(2), domain_head(20)]
        start = [part.get_weights() for part in parts]
        theirs = [keras.models.clone_model(part) for part in parts]
        for part, weights in zip(theirs, start):
            part.set_weights(weights)
        theirs[2].set_weights([start[2][0][order]] + start[2][1:])
        constructor, compile_arguments = arguments(method, change)
        ours = PathsCDAN(*parts, entropy_conditioning=method == "cdan_e", **constructor)
        if compile_arguments.pop("adapt_loss", False):
            compile_arguments["domain_loss"] = adapt_domain_loss
        ours.compile(keras.optimizers.SGD(1.0), "sparse_categorical_crossentropy", **compile_arguments)
        ours.fit(xs, ys, target=xt, batch_size=2 * n, steps_per_epoch=1, shuffle=False, verbose=0)
        peer = AdaptCDAN(
            encoder=theirs[0],
            task=theirs[1],
            discriminator=theirs[2],
            entropy=method == "cdan_e",
            lambda_=1.0,
            optimizer=keras.optimizers.SGD(1.0),
            loss="categorical_crossentropy",
            copy=False,
            verbose=0,
        )
        peer.fit(xs, np.eye(2, dtype="float32")[ys], xt, epochs=1, batch_size=n, verbose=0)
        line = [f"{config:24s}"]
        for name, part, peer_part, weights in zip(("encoder", "label head", "domain head"), parts, theirs, start):
            ours_step = [after - before for after, before in zip(part.get_weights(), weights)]
            if name == "domain head":
                ours_step[0] = ours_step[0][order]
                weights = [weights[0][order]] + weights[1:]
            peer_step = [after - before for after, before in zip(peer_part.get_weights(), weights)]
            difference = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(ours_step, peer_step))
            line.append(f"{name} {difference:.2e}")
        print("  ".join(line), flush=True)


def config_list(text: str) -> list[str]:
    configs = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown configurations {unknown}; accepted: {CONFIGS}")
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--configs", type=config_list, default=["cdan:adapt", "cdan_e:adapt"])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--check-adapt-step", action="store_true", help="compare one step with ADAPT's, then exit")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if args.check_adapt_step:
        check_adapt_step(make_moons_rotated())
        return
    run_over_seeds(args.configs, args.seeds, lambda config: train, args.epochs, 32)


if __name__ == "__main__":
    main()
