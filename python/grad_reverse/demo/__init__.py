"""`python -m grad_reverse demo`: the inter-twinning moons experiment of
Ganin et al., "Domain-Adversarial Training of Neural Networks", JMLR 2016, §5.1.1.

Source domain: two moons, 150 labeled points each. Target domain: 300 fresh
points of the same distribution rotated by 35°, whose labels training never
sees. A source-only network and a DANN (`grad_reverse.DANN`: the same network
plus a domain head behind `GradReverse`) are trained with Keras `fit`; the
DANN with the paper's objective and lambda schedule towards 6.

What to expect (seeds 0-19 on a 2-core x86 CPU): source accuracy 1.00 for
both networks on every seed (0.997 once); target accuracy 0.69-0.80 (mean
0.74) for source-only and 0.82-1.00 (mean 0.93) for DANN, at least 0.09
above source-only on every seed and 0.95 or more on 7 of 20. The paper shows one
run in which DANN classifies the target almost perfectly; here that is the
good end of a spread, as expected from a 15-unit feature layer and a linear
domain classifier, which can only make the features' means match.

`demo --problem blobs` or `demo --methods ...` compares methods instead:
source-only, DANN, CDAN, CDAN+E and MDD, each from the same weights on the
same batches per seed (`compare`, `comparison`; docs/demo.md).

The modules, one job each:

* `data`: the moons and the rotated target (numpy only);
* `models`: the two networks (the DANN is a `grad_reverse.DANN`), their
  predictions and accuracy;
* `training`: optimizer, batches, `fit` (why each choice: its docstring);
* `progress`: Keras' bar on a terminal, short lines in files and pipes;
* `plot`: the decision-boundary picture, one panel per model (matplotlib,
  the `bench` extra);
* `export`: the serving export (`grad_reverse.serving.export_serving` of a
  model's label path, so the graph holds stock TensorFlow ops only) and its check;
* `experiment`: `run()`, the whole moons experiment: seeds, report, plot,
  export and check, results.json;
* `problems`: the problems a comparison runs on (moons, blobs);
* `compare`: the models of source-only, DANN, CDAN, CDAN+E and MDD for a
  problem, their training over seeds, the table (and the old
  `python -m grad_reverse.demo.compare`, now an alias of the command);
* `plot_accuracy`: a comparison's target accuracy per method and seed;
* `comparison`: `run_methods()`, `demo --methods`: the comparison's
  training, table, pictures, export and check, results.json;
* `cli`: the `demo` command's options, which of the two it runs, its exit status.

This file imports no TensorFlow, so `python -m grad_reverse demo --help` is quick.
"""

DEFAULT_OUT = "grad_reverse_demo"
DEFAULT_SEEDS = (0, 1, 2)
DEFAULT_STEPS = 3000
