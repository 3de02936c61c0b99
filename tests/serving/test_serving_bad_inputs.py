"""make-servable on bad input: one error line, exit 2, SRC untouched, no DST.

Bad SRC (not a directory, not a SavedModel, truncated or garbage proto,
missing variables; test_serving_corrupt.py has the damaged files), an
existing DST without --overwrite, a folder of someone's files with it, DST
inside SRC, and a run interrupted half-way.
"""

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from grad_reverse import serving
from grad_reverse.serving import servable
from helpers.serving import run_make_servable, tree_hash

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def assert_one_error(err: str, path: Path, reason: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("make-servable: error: ") and reason in lines[0], lines[0]
    assert lines[0].count(str(path)) == 1, lines[0]


def test_missing_src_is_no_such_directory_with_the_real_command(tmp_path):
    missing, dst = tmp_path / "missing", tmp_path / "dst"
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "make-servable", str(missing), str(dst)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert result.returncode == 2
    assert f"make-servable: error: {missing}: no such directory" in result.stderr
    assert "Traceback" not in result.stderr and not dst.exists()


def bad_source(kind: str, tmp_path: Path, small_export: Path) -> tuple:
    src = tmp_path / "src"
    if kind == "file":
        src.write_text("not a directory")
        return src, "not a directory"
    if kind == "empty_directory":
        src.mkdir()
        return src, "no saved_model.pb"
    copy_tree(small_export, src)
    pb = src / "saved_model.pb"
    if kind == "truncated":
        pb.write_bytes(pb.read_bytes()[: pb.stat().st_size // 2])
        return src, "saved_model.pb is corrupt or truncated"
    if kind == "garbage":
        pb.write_bytes(b"\xff" * 100)
        return src, "saved_model.pb is corrupt or truncated"
    if kind == "no_variables":
        shutil.rmtree(src / "variables")
        return src, "has no variables folder"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["file", "empty_directory", "truncated", "garbage", "no_variables"])
def test_bad_source_gets_one_error_line_exit_2_and_no_dst(capsys, tmp_path, small_export, kind):
    src, reason = bad_source(kind, tmp_path, small_export)
    dst = tmp_path / "dst"
    code, _, err = run_make_servable(capsys, src, dst)
    assert code == 2
    assert_one_error(err, src, reason)
    assert not dst.exists() and [p.name for p in tmp_path.iterdir()] == ["src"]


def test_existing_dst_is_refused_without_overwrite_and_replaced_with_it(capsys, tmp_path, small_export):
    dst = tmp_path / "dst"
    shutil.copytree(small_export, dst)
    (dst / "saved_model.pb").write_bytes(b"an earlier copy")
    code, _, err = run_make_servable(capsys, small_export, dst)
    assert code == 2
    assert_one_error(err, dst, "already exists; pass --overwrite to replace it")
    assert "overwrite=True" not in err  # the command line's words, not the Python API's
    assert (dst / "saved_model.pb").read_bytes() == b"an earlier copy"
    code, out, _ = run_make_servable(capsys, small_export, dst, "--overwrite", "--no-verify")
    assert code == 0 and "verify: skipped" in out
    assert (dst / "saved_model.pb").read_bytes() != b"an earlier copy"
    assert (dst / "variables" / "variables.index").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst"]  # no staging folders left


def users_folder(dst: Path) -> dict:
    """A folder of someone's files at DST: what --overwrite must not delete."""
    (dst / "data").mkdir(parents=True)
    files = {"readme.txt": "my notes", "data/points.csv": "1,2\n", "train.py": "print('hi')"}
    for name, text in files.items():
        (dst / name).write_text(text)
    return files


def test_overwrite_refuses_a_folder_that_is_not_a_saved_model_and_names_what_is_in_it(capsys, tmp_path, small_export):
    dst = tmp_path / "dst"
    files = users_folder(dst)
    code, _, err = run_make_servable(capsys, small_export, dst, "--overwrite", "--no-verify")
    assert code == 2
    assert_one_error(err, dst, "is not a SavedModel (it holds data/, readme.txt, train.py)")
    assert "--overwrite-any-directory" in err and "overwrite_any_directory" not in err
    assert {name: (dst / name).read_text() for name in files} == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst"]


def test_overwrite_any_directory_replaces_a_folder_of_other_files(capsys, tmp_path, small_export):
    dst = tmp_path / "dst"
    users_folder(dst)
    code, _, _ = run_make_servable(capsys, small_export, dst, "--overwrite-any-directory", "--no-verify")
    assert code == 0
    assert not (dst / "readme.txt").exists() and (dst / "saved_model.pb").is_file()


def test_overwrite_replaces_an_empty_directory(capsys, tmp_path, small_export):
    dst = tmp_path / "dst"
    dst.mkdir()
    code, _, _ = run_make_servable(capsys, small_export, dst, "--overwrite", "--no-verify")
    assert code == 0 and (dst / "saved_model.pb").is_file()


def test_python_api_names_its_keyword_when_refusing_a_users_folder(tmp_path, small_export):
    dst = tmp_path / "dst"
    users_folder(dst)
    with pytest.raises(serving.SavedModelError, match="overwrite_any_directory=True") as raised:
        serving.make_servable(small_export, dst, overwrite=True, verify=False, out=io.StringIO())
    assert "--overwrite" not in str(raised.value)
    assert (dst / "readme.txt").read_text() == "my notes"


def test_export_serving_refuses_to_replace_a_users_folder(tmp_path):
    from helpers.serving import keras_dann

    dst = tmp_path / "dst"
    users_folder(dst)
    with pytest.raises(serving.SavedModelError, match="is not a SavedModel"):
        serving.export_serving(keras_dann(), dst)
    assert (dst / "readme.txt").read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst"]  # its Keras export removed too


def test_dst_inside_src_is_refused(capsys, tmp_path, small_export):
    src = copy_tree(small_export, tmp_path / "src")
    before = tree_hash(src)
    code, _, err = run_make_servable(capsys, src, src / "servable")
    assert code == 2 and "must be outside SRC" in err
    code, _, err = run_make_servable(capsys, src, src, "--overwrite")
    assert code == 2 and "must be outside SRC" in err
    assert tree_hash(src) == before


def test_interrupted_run_leaves_no_dst(monkeypatch, tmp_path, small_export):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(servable, "_check_stock_ops", interrupted)
    with pytest.raises(KeyboardInterrupt):
        serving.make_servable(small_export, tmp_path / "dst", out=io.StringIO())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("model", [tf.Module(), object(), "model"], ids=["tf.Module", "object", "str"])
def test_export_serving_of_something_without_export_is_a_type_error_saying_what_is_accepted(tmp_path, model):
    with pytest.raises(TypeError) as raised:
        serving.export_serving(model, tmp_path / "out")
    message = str(raised.value)
    assert "exports a Keras model (it calls `model.export`)" in message
    assert type(model).__qualname__ in message and "make_servable" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["users_folder", "file"])
def test_without_overwrite_the_advice_names_only_what_would_work(capsys, tmp_path, small_export, kind):
    dst = tmp_path / "dst"
    if kind == "file":
        dst.write_text("someone's file")
    else:
        users_folder(dst)
    code, _, err = run_make_servable(capsys, small_export, dst, "--no-verify")
    assert code == 2
    assert re.search(r"--overwrite(?!-any-directory)", err) is None, err
    assert "choose another DST" in err
    if kind == "users_folder":
        assert "already exists and is not a SavedModel (it holds data/, readme.txt, train.py)" in err
        assert "--overwrite-any-directory" in err
        # ... and that advice works.
        code, _, _ = run_make_servable(capsys, small_export, dst, "--overwrite-any-directory", "--no-verify")
        assert code == 0
