"""The version-matrix script's own logic: rows, JUnit counting, the table.
(Running rows means installing TensorFlow releases: that is the script's job,
run by hand and, for the 2.15 row, by CI.)"""

import argparse
import re

import pytest
import tensorflow_matrix as matrix  # scripts/ is on the path (pyproject's pytest `pythonpath`)


def test_a_row_is_a_release_with_an_optional_python():
    assert (matrix.parse_row("2.18", "3.11").release, matrix.parse_row("2.18", "3.11").python) == ("2.18", "3.11")
    assert matrix.parse_row("2.21@3.13", "3.11").python == "3.13"
    with pytest.raises(argparse.ArgumentTypeError, match="RELEASE\\[@PYTHON\\]"):
        matrix.parse_row("latest", "3.11")


def test_the_default_rows_cover_every_supported_release_and_the_extra_pythons():
    import tensorflow_requirement  # build_tools/ is on the path (pyproject's pytest `pythonpath`)

    oldest, newest = tensorflow_requirement.OLDEST_SUPPORTED, tensorflow_requirement.NEWEST_SUPPORTED
    assert tuple(f"2.{minor}" for minor in range(oldest[1], newest[1] + 1)) == matrix.RELEASES
    assert {row.split("@")[1] for row in matrix.EXTRA_PYTHON_ROWS} == {"3.10", "3.12", "3.13"}


def test_a_missing_interpreter_is_a_row_result_not_a_failure(tmp_path):
    [row] = matrix.run_row(matrix.Row("2.21", "3.99"), tmp_path, tmp_path, keep=False)
    assert row.result == "no interpreter" and "3.99" in row.note


def test_the_rc_row_installs_the_pinned_release_candidate():
    assert matrix.parse_row("rc@3.14", "3.11").release == "rc"
    pin = matrix.tensorflow_requirement("rc")
    assert re.fullmatch(r"tensorflow-cpu==2\.\d+\.\d+(rc\d+)?", pin), pin


def test_the_nightly_row_installs_the_pinned_nightly_never_the_latest():
    assert matrix.parse_row("nightly", "3.11").release == "nightly"
    pin = matrix.tensorflow_requirement("nightly")
    assert pin.startswith("tf-nightly==2.") and ".dev" in pin
    assert matrix.tensorflow_requirement("2.18") == "tensorflow-cpu==2.18.*"


def test_junit_results_are_counted_with_skip_reasons(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="ok"/>'
        '<testcase classname="tests.test_a" name="bad"><failure message="boom"/></testcase>'
        '<testcase classname="tests.test_a" name="err"><error message="setup"/></testcase>'
        '<testcase classname="tests.test_b" name="gpu1"><skipped message="no GPU"/></testcase>'
        '<testcase classname="tests.test_b" name="gpu2"><skipped message="no GPU"/></testcase>'
        "</testsuite></testsuites>"
    )
    row = matrix.Row("2.15", "3.11")
    matrix.read_junit(junit, row)
    assert (row.passed, row.failed, row.skipped) == (1, 2, 2)
    assert row.skip_reasons == {"no GPU": 2}
    assert row.failures == ["tests.test_a::bad", "tests.test_a::err"]


def test_the_table_has_one_line_per_row():
    rows = [
        matrix.Row(
            "2.15",
            "3.11",
            result="passed",
            tensorflow="2.15.1",
            python_version="3.11.7",
            build_seconds=93.4,
            passed=150,
            skipped=3,
            xla_kernels=True,
        ),
        matrix.Row("2.15", "3.13", result="no wheel", note="no wheel for 3.13"),
    ]
    table = matrix.markdown(rows).splitlines()
    assert len(table) == 4
    assert table[2] == "| 2.15.1 | 3.11.7 |  | passed | 93 | 150 | 0 | 3 | yes |  |"
    assert table[3].startswith("| 2.15 | 3.13 |  | no wheel |") and table[3].endswith("no wheel for 3.13 |")
    forced = matrix.Row("2.21", "3.11", library="stable", loaded="stable", result="passed")
    assert matrix.markdown([forced]).splitlines()[2].startswith("| 2.21 | 3.11 | stable (stable) | passed |")


def test_require_pass_turns_a_row_that_did_not_run_into_a_failure(tmp_path, capsys):
    row = ["2.21@3.99", "--out", str(tmp_path)]  # no Python 3.99: the row cannot run
    assert matrix.main(row) == 0
    assert matrix.main([*row, "--require-pass"]) == 1
    assert "no interpreter" in (tmp_path / "matrix.md").read_text()


def test_a_tree_that_is_not_a_git_checkout_is_copied_too(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    (tree / "python").mkdir(parents=True)
    (tree / "python" / "module.py").write_text("x = 1\n")
    (tree / "build" / "cp311").mkdir(parents=True)
    (tree / "build" / "cp311" / "big.o").write_text("")
    monkeypatch.setattr(matrix, "ROOT", tree)
    copy = tmp_path / "copy"
    copy.mkdir()
    assert matrix.copy_source(copy) == "unknown"
    assert (copy / "python" / "module.py").read_text() == "x = 1\n"
    assert not (copy / "build").exists()
