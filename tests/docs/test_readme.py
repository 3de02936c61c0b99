"""The README and the manuals in docs/, run and resolved as written.

For README.md and every docs/**/*.md (found each run, so a manual added later
is covered without touching this file):

* every ```python block is executed;
* every `grad_reverse.a.b` it names (in prose or code) must exist after
  `import grad_reverse` in a fresh process;
* every `python -m grad_reverse COMMAND` it shows must be a command;
* every relative link must point to a file of this repository, and a link's
  `#anchor` to a heading of that file;
* every manual in docs/ must be linked from the README, and every results
  page (docs/results/) from a manual, so a reader finds it;
* and the README stays short (README_MAX_LINES) and quotes no test counts,
  which every new test makes stale.

Some blocks of docs/ use names the reader is expected to have (`x`,
`features`, `model`, `path`): SETUP below defines them, the same for every
block. A block that needs anything else fails with its NameError, loudly:
give it a definition here or make it self-contained. The README's blocks get
no SETUP: a new reader copies them as they are, so they must run as written. Bazel (Starlark) files shown in
```python fences are recognized by BAZEL_MARKERS and only compiled, since
they cannot run.
"""

import ast
import functools
import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import __main__ as cli
from grad_reverse._keras import KERAS_3, keras

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
MANUALS = sorted((ROOT / "docs").glob("*.md"))
RESULTS = sorted((ROOT / "docs" / "results").glob("*.md"))
README_MAX_LINES = 250
# A fence may be indented (a block inside a list item); its code is dedented.
FENCE = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
ANY_FENCE = re.compile(r"^([ \t]*)```.*?^\1```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
BAZEL_MARKERS = ("local_repository(", "http_archive(", "SUPPORTED_TENSORFLOW_OPS", "cc_library(", 'load("@')


def relative(document: Path) -> str:
    return document.relative_to(ROOT).as_posix()


def python_blocks() -> list:
    """(document, line number, code) of every ```python block, in order."""
    blocks = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        blocks += [
            (relative(document), text.count("\n", 0, m.start()) + 1, textwrap.dedent(m.group(2)))
            for m in FENCE.finditer(text)
        ]
    return blocks


def all_text() -> str:
    return "\n".join(document.read_text(encoding="utf-8") for document in DOCUMENTS)


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


@functools.cache  # one module object for every block that uses it
def mutant_class() -> type:
    """scripts/mutation_lib/mutants.py's Mutant, which docs/testing.md shows an entry of."""
    # scripts/ is on pytest's pythonpath (pyproject.toml), as it is for the mutation check.
    return importlib.import_module("mutation_lib.mutants").Mutant


def setup_namespace(directory: Path) -> dict:
    """SETUP: the names blocks may use without defining them."""
    return {
        "x": tf.constant([[1.0, -2.0, 0.5]]),
        "features": tf.ones([4, 8]),
        "model": small_dann_model(),
        "path": str(directory / "exports" / "model"),
        "Mutant": mutant_class(),
    }


BLOCKS = python_blocks()
# Documents whose blocks use Keras 3 only (keras.Variable, its backends): TensorFlow 2.15's Keras 2 skips them.
KERAS_3_DOCUMENTS = {"docs/keras-backends.md"}


def test_the_readme_has_python_blocks():
    assert len([code for document, _, code in BLOCKS if document == "README.md" and not is_bazel(code)]) >= 1
    assert len([code for _, _, code in BLOCKS if not is_bazel(code)]) >= 3


@pytest.mark.parametrize("document, line, code", BLOCKS, ids=[f"{d}:{line}" for d, line, _ in BLOCKS])
def test_python_block_runs(document, line, code, tmp_path, monkeypatch):
    if is_bazel(code):
        ast.parse(code)  # Starlark shares Python's syntax; it cannot run here
        return
    if document in KERAS_3_DOCUMENTS and not KERAS_3:
        pytest.skip(f"{document} is about Keras 3's backends; this is Keras {keras.__version__}")
    monkeypatch.chdir(tmp_path)  # blocks write relative paths such as exports/dann/1
    setup_files(code)
    namespace = {} if document == "README.md" else setup_namespace(tmp_path)
    exec(compile(code, f"{document}, block at line {line}", "exec"), namespace)


# `grad_reverse.serving.export_serving`, in prose or code; not file names.
DOTTED_NAME = re.compile(r"(?<![\w/.-])grad_reverse(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIXES = {"so", "cc", "h", "cu", "py", "json", "png", "whl", "md", "txt"}
# A name is an attribute reached from `import grad_reverse`, or a submodule
# the docs import explicitly (`from grad_reverse.demo.data import ...`).
RESOLVE = """
import importlib
import sys
import grad_reverse

def submodule(dotted):
    try:
        return importlib.import_module(dotted)
    except ImportError:
        return None

missing = []
for dotted in sys.argv[1:]:
    value = grad_reverse
    parts = dotted.split(".")
    for i, part in enumerate(parts[1:], start=2):
        if not hasattr(value, part):
            found = submodule(".".join(parts[:i]))
            if found is None:  # a module's name, shadowed in its package by the function it defines?
                shadowed = submodule(".".join(parts[: i - 1]))
                found = getattr(shadowed, part, None) if shadowed is not None else None
            if found is None:
                missing.append(dotted)
                break
            value = found
        else:
            value = getattr(value, part)
print("missing:", " ".join(missing))
"""


def test_every_grad_reverse_name_the_docs_show_exists_after_import_grad_reverse():
    # (or is a submodule that can be imported by that name)
    names = sorted(
        {m.group(0) for m in DOTTED_NAME.finditer(all_text()) if m.group(0).rsplit(".", 1)[1] not in FILE_SUFFIXES}
    )
    assert "grad_reverse.serving.export_serving" in names  # the finder finds
    # A fresh process: here, other tests' imports of submodules would bind
    # attributes that a user's `import grad_reverse` alone might not.
    result = subprocess.run([sys.executable, "-c", RESOLVE, *names], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "missing:", (
        f"the README or docs show these names, but after `import grad_reverse` they do not exist: {result.stdout}"
    )


def test_every_command_the_docs_show_is_a_command():
    shown = set(re.findall(r"python -m grad_reverse ([a-z][\w-]*)", all_text()))
    known = {command.name for command in cli.COMMANDS}
    assert {"demo", "bench", "make-servable"} <= shown, "the finder finds"
    assert shown <= known, f"the README or docs show commands that do not exist: {sorted(shown - known)}"


# [text](target): outside code, where brackets mean something else.
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def prose(text: str) -> str:
    """`text` without fenced blocks and code spans."""
    return CODE_SPAN.sub("", ANY_FENCE.sub("", text))


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped
    (hyphens and underscores kept), spaces become hyphens."""
    words = re.sub(r"[^\w\- ]", "", heading.lower())
    return words.replace(" ", "-")


def anchors(document: Path) -> set:
    found, seen = set(), {}
    for heading in HEADING.findall(ANY_FENCE.sub("", document.read_text(encoding="utf-8"))):
        anchor = heading_anchor(heading)
        # GitHub numbers repeated headings: x, x-1, x-2, ...
        found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
        seen[anchor] = seen.get(anchor, 0) + 1
    return found


def broken(document: Path, target: str) -> str | None:
    """Why the link `target` in `document` does not resolve, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
        return None
    path, _, anchor = target.partition("#")
    linked = (document.parent / path).resolve() if path else document
    if ROOT not in linked.parents and linked != ROOT:
        return "points outside the repository"
    if not linked.exists():
        return "no such file"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"{relative(linked)} has no heading with the anchor #{anchor}"
    return None


def links(document: Path) -> list:
    return LINK.findall(prose(document.read_text(encoding="utf-8")))


def test_every_relative_link_resolves():
    found = {relative(document): links(document) for document in DOCUMENTS}
    assert "docs/serving.md" in found["README.md"], "the finder finds"
    problems = [
        f"{name}: ({target}): {why}"
        for document in DOCUMENTS
        for name, target in [(relative(document), t) for t in found[relative(document)]]
        for why in [broken(document, target)]
        if why
    ]
    assert not problems, "links that do not resolve:\n" + "\n".join(problems)


def linked_from(documents: list) -> set:
    return {
        (document.parent / target.partition("#")[0]).resolve() for document in documents for target in links(document)
    }


def test_every_manual_in_docs_is_linked_from_the_readme():
    linked = linked_from([README])
    unlinked = [relative(document) for document in MANUALS if document.resolve() not in linked]
    assert MANUALS, "docs/ holds no manual?"
    assert not unlinked, f"manuals in docs/ that the README does not link to: {unlinked}"


def test_every_results_page_is_linked_from_a_manual():
    linked = linked_from([README, *MANUALS])
    unlinked = [relative(document) for document in RESULTS if document.resolve() not in linked]
    assert RESULTS, "docs/results/ holds no page?"
    assert not unlinked, f"results pages that no manual (nor the README) links to: {unlinked}"


def test_the_readme_stays_short():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move details to a manual in docs/ and link it"
    )


# "1168 passed, 62 skipped", "24 tests", "1324 not-slow tests": every new test makes them stale.
TEST_COUNT = re.compile(r"\b\d+ (?:passed|skipped|failed|(?:not-slow |slow )?tests)\b")


def test_the_readme_quotes_no_test_counts():
    counts = TEST_COUNT.findall(README.read_text(encoding="utf-8"))
    assert not counts, f"README.md quotes test counts, which go stale (keep them in docs/results/): {counts}"


# The README's first screen: the two commands, then what the package is, then
# the times. .ci/run takes the commands by position (the first ```bash
# block's lines 1 and 2), so their shape is checked here, not only there.
BASH_BLOCK = re.compile(r"^```bash[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_readme_opens_with_the_two_commands_in_the_order_ci_reads_them():
    text = README.read_text(encoding="utf-8")
    block = BASH_BLOCK.search(text)
    assert block, "README.md has no ```bash block"
    main_job, tests = block.group(1).strip().splitlines()
    assert main_job.startswith('pip install ".[bench]" && ') and main_job.endswith(
        "python -m grad_reverse demo && python -m grad_reverse bench --quick"
    ), main_job
    assert tests == 'pip install ".[test]" && python -m pytest -n auto --dist loadfile -m "not slow" tests', tests
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert text.index("## What it is") > block.start(), "the commands come first"
    assert headings[0] == "What it is", f"the first section after the commands is {headings[0]!r}"
    times = text.index("| CPU | first command: install |")
    assert text.index("## What it is") < times < text.index("## Python API"), (
        "the times table follows 'What it is' and precedes the API"
    )


def test_the_readme_leaves_no_placeholder_for_the_reader_to_guess():
    # `git clone <its URL>` with no URL anywhere: say where it comes from instead.
    placeholders = re.findall(r"<[^<>\n]*\b(?:URL|url)\b[^<>\n]*>", README.read_text(encoding="utf-8"))
    assert not placeholders, f"README.md has placeholders a new user cannot fill: {placeholders}"


# "Python 3.10 to 3.13", "the supported Pythons are 3.10 to 3.13", a table's
# "| Python | 3.10 to 3.13": across a line break too.
PYTHON_RANGE = re.compile(r"Pythons?(?: are)?\W{0,4}3\.(\d+)\s+to\s+3\.(\d+)")


def test_one_python_range_everywhere_and_pyproject_agrees():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    oldest = re.search(r'^requires-python = ">=3\.(\d+)"$', pyproject, re.MULTILINE)
    classified = sorted(int(minor) for minor in re.findall(r'"Programming Language :: Python :: 3\.(\d+)"', pyproject))
    assert oldest and classified, "pyproject.toml names requires-python and one classifier per Python"
    assert classified == list(range(int(oldest.group(1)), classified[-1] + 1)), (
        f"the classifiers' Pythons {[f'3.{minor}' for minor in classified]} do not run from "
        f"requires-python's 3.{oldest.group(1)} without gaps"
    )
    supported = (classified[0], classified[-1])
    ranges = {
        (relative(document), (int(low), int(high)))
        for document in DOCUMENTS
        for low, high in PYTHON_RANGE.findall(document.read_text(encoding="utf-8"))
    }
    assert ("README.md", supported) in ranges, "the finder finds"
    wrong = sorted((name, f"3.{low} to 3.{high}") for name, (low, high) in ranges if (low, high) != supported)
    assert not wrong, f"Python ranges that differ from pyproject.toml's 3.{supported[0]} to 3.{supported[1]}: {wrong}"
