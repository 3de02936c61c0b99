"""The demo's progress output: one short line per interval off a terminal,
Keras' bars only on one."""

import io

from grad_reverse.demo import data, progress, training


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_line_progress_prints_one_line_at_the_end_and_one_per_interval():
    lines, clock = [], FakeClock()
    callback = progress.LineProgress("fit", 100, every_seconds=10.0, print_fn=lines.append, clock=clock)
    callback.on_train_begin()
    for step in range(100):
        clock.now = step * 0.25  # 25 s in all: lines at 10 s and 20 s
        callback.on_train_batch_end(step, {"loss": 0.5 - step / 1000})
    callback.on_train_end({"loss": 0.4, "accuracy": 1.0})
    assert len(lines) == 3, lines
    assert lines[0] == "  fit: step 41/100, 10.0 s; Keras logs: loss 0.460"
    assert lines[1].startswith("  fit: step 81/100, 20.0 s")
    assert lines[2] == "  fit: step 100/100, 24.8 s; Keras logs: loss 0.400, accuracy 1.000"


def test_fit_progress_uses_keras_bars_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert progress.fit_progress("fit", 10, quiet=False, stream=Terminal()) == (1, [])
    verbose, callbacks = progress.fit_progress("fit", 10, quiet=False, stream=io.StringIO())
    assert verbose == 0 and [type(c) for c in callbacks] == [progress.LineProgress]
    assert progress.fit_progress("fit", 10, quiet=True, stream=Terminal()) == (0, [])


def test_training_output_off_a_terminal_is_short_lines(capsys):
    domains = data.make_domains(0)
    training.train_plain(domains, 0, 30, quiet=False)
    training.train_dann(domains, 0, 30, quiet=False)
    out = capsys.readouterr().out
    lines = out.splitlines()
    # One line per run (and one per 10 s, should a run take that long here).
    assert sum("step 30/30" in line for line in lines) == 2, out
    assert all(len(line) < 200 and line.startswith("  fit: step ") for line in lines), lines
