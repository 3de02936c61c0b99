"""The README's Python, run as written: every ```python block is executed,
every `grad_reverse.a.b` it names (in prose or code) must exist after
`import grad_reverse` in a fresh process, and every `python -m grad_reverse COMMAND` it shows
must be a command.

The blocks are read from README.md each run, not copied here, so a block
added or changed later is tested as it is. Some blocks use names the reader
is expected to have (`x`, `features`, `model`, `path`): SETUP below defines
them, the same for every block. A block that needs anything else fails
with its NameError, loudly: give it a definition here or make it
self-contained. Bazel (Starlark) files shown in ```python fences are
recognized by BAZEL_MARKERS and only compiled, since they cannot run.
"""

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import __main__ as cli
from grad_reverse._keras import keras

README = Path(__file__).resolve().parent.parent / "README.md"
# A fence may be indented (a block inside a list item); its code is dedented.
FENCE = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
BAZEL_MARKERS = ("local_repository(", "http_archive(", "SUPPORTED_TENSORFLOW_OPS", "cc_library(", "load(\"@")


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def python_blocks() -> list:
    """(line number, code) of every ```python block, in order."""
    text = readme_text()
    return [(text.count("\n", 0, m.start()) + 1, textwrap.dedent(m.group(2))) for m in FENCE.finditer(text)]


def is_bazel(code: str) -> bool:
    return any(marker in code for marker in BAZEL_MARKERS)


def small_dann_model() -> keras.Model:
    """A Keras DANN with GradReverse: features -> label, features -> GradReverse -> domain."""
    inputs = keras.Input((3,), name="x")
    features = keras.layers.Dense(8, activation="relu")(inputs)
    label = keras.layers.Dense(2, name="label")(features)
    domain = keras.layers.Dense(1, name="domain")(grad_reverse.GradReverse(lambda_=1.0)(features))
    return keras.Model(inputs, {"label": label, "domain": domain})


class ModuleWithTheOp(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def __call__(self, x):
        return grad_reverse.grad_reverse(x, 1.0)


def setup_files(code: str) -> None:
    """SETUP: placeholder paths a block reads, created in its working directory."""
    if "path/to/saved_model" in code:
        # A SavedModel holding the op: loading it needs `import grad_reverse`.
        tf.saved_model.save(ModuleWithTheOp(), "path/to/saved_model")


def setup_namespace(directory: Path) -> dict:
    """SETUP: the names README blocks may use without defining them."""
    return {
        "x": tf.constant([[1.0, -2.0, 0.5]]),
        "features": tf.ones([4, 8]),
        "model": small_dann_model(),
        "path": str(directory / "exports" / "model"),
    }


BLOCKS = python_blocks()


def test_the_readme_has_python_blocks():
    assert len([code for _, code in BLOCKS if not is_bazel(code)]) >= 2


@pytest.mark.parametrize("line, code", BLOCKS, ids=[f"line{line}" for line, _ in BLOCKS])
def test_readme_python_block_runs(line, code, tmp_path, monkeypatch):
    if is_bazel(code):
        ast.parse(code)  # Starlark shares Python's syntax; it cannot run here
        return
    monkeypatch.chdir(tmp_path)  # blocks write relative paths such as exports/dann/1
    setup_files(code)
    namespace = setup_namespace(tmp_path)
    exec(compile(code, f"README.md, block at line {line}", "exec"), namespace)


# `grad_reverse.serving.export_serving`, in prose or code; not file names.
DOTTED_NAME = re.compile(r"(?<![\w/.-])grad_reverse(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIXES = {"so", "cc", "h", "cu", "py", "json", "png", "whl", "md", "txt"}
RESOLVE = """
import sys
import grad_reverse

missing = []
for dotted in sys.argv[1:]:
    value = grad_reverse
    for part in dotted.split(".")[1:]:
        if not hasattr(value, part):
            missing.append(dotted)
            break
        value = getattr(value, part)
print("missing:", " ".join(missing))
"""


def test_every_grad_reverse_name_the_readme_shows_exists_after_import_grad_reverse():
    names = sorted({
        m.group(0) for m in DOTTED_NAME.finditer(readme_text())
        if m.group(0).rsplit(".", 1)[1] not in FILE_SUFFIXES
    })
    assert "grad_reverse.serving.export_serving" in names  # the finder finds
    # A fresh process: here, other tests' imports of submodules would bind
    # attributes that a user's `import grad_reverse` alone might not.
    result = subprocess.run([sys.executable, "-c", RESOLVE, *names], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "missing:", (
        f"the README shows these names, but after `import grad_reverse` they do not exist: {result.stdout}"
    )


def test_every_command_the_readme_shows_is_a_command():
    shown = set(re.findall(r"python -m grad_reverse ([a-z][\w-]*)", readme_text()))
    known = {command.name for command in cli.COMMANDS}
    assert shown, "the README shows no command?"
    assert shown <= known, f"the README shows commands that do not exist: {sorted(shown - known)}"
