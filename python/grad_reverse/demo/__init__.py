"""`python -m grad_reverse demo`: the inter-twinning moons experiment of
Ganin et al., "Domain-Adversarial Training of Neural Networks", JMLR 2016, §5.1.1.

Source domain: two moons, 150 labeled points each. Target domain: 300 fresh
points of the same distribution rotated by 35°, whose labels training never
sees. A plain network and a DANN (`grad_reverse.DANN`: the same network
plus a domain head behind `GradReverse`) are trained with Keras `fit`; the
DANN with the paper's objective and lambda schedule towards 6.

The promise: both networks fit the source, and DANN's target accuracy,
averaged over the seeds, is above the plain network's (the command's exit status
says whether it was); single seeds differ from CPU to CPU, means less.
docs/demo.md has what was measured over seeds and machines, and why a
15-unit feature layer with a linear domain classifier gives a spread of
target accuracies rather than the paper's single near-perfect run.

`demo --problem blobs` or `demo --methods ...` compares methods instead:
plain, DANN, CDAN, CDAN+E and MDD, each from the same weights on the
same batches per seed (`method_runs`, `methods_experiment`; docs/demo.md).
`demo --problem fashion-mnist-m` does so on images: the paper's MNIST ->
MNIST-M shift made from Fashion-MNIST (`image_runs`), with a network trained
on the target's labels as the ceiling.

The modules, one job each:

* `data`: the moons and the rotated target (numpy only);
* `models`: the two networks (the DANN is a `grad_reverse.DANN`), their
  predictions and accuracy;
* `training`: optimizer, batches, `fit` (why each choice: its docstring);
* `progress`: Keras' bar on a terminal, short lines in files and pipes;
* `plot`: the decision-boundary picture, one panel per model (matplotlib,
  the `bench` extra);
* `export_and_check`: the serving export (`grad_reverse.serving.export_serving` of a
  model's label path, so the graph holds stock TensorFlow ops only) and its check;
* `experiment`: `run()`, the whole moons experiment: seeds, report, plot,
  export and check, results.json;
* `problems`: the problems a comparison runs on (moons, blobs);
* `method_runs`: the models of the plain network, DANN, CDAN, CDAN+E and MDD for a
  problem, their training over seeds, the table;
* `plot_accuracy`: a comparison's target accuracy per method and seed;
* `fashion_mnist`: Fashion-MNIST's IDX files, found where a system package or
  Keras put them, and read (numpy only);
* `photo_patches`: the MNIST-M blending, `|image - photograph patch|`, with
  scikit-learn's sample photographs;
* `image_runs`: the image problem (`fashion-mnist-m`), the paper's MNIST
  network and schedule, its training over seeds, the table with the share
  of the gap closed;
* `plot_images`: the image problem's samples of both domains;
* `methods_experiment`: `run_methods()`, `demo --methods`: the comparison's
  training, table, pictures, export and check, results.json;
* `cli`: the `demo` command's options, which of the two it runs, its exit status.

This file imports no TensorFlow, so `python -m grad_reverse demo --help` is quick.
"""

DEFAULT_OUT = "grad_reverse_demo"
DEFAULT_SEEDS = (0, 1, 2)
DEFAULT_STEPS = 3000
