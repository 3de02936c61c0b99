"""make-servable on bad input: one error line, exit 2, SRC untouched, no DST.

Bad SRC (not a directory, not a SavedModel, truncated or garbage proto,
missing variables), an existing DST without --overwrite, DST inside SRC, and
a run interrupted half-way.
"""

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grad_reverse import serving
from grad_reverse.serving import servable
from test_serving import run_make_servable
from test_serving_make_servable import tree_hash

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
    result = subprocess.run([sys.executable, "-m", "grad_reverse", "make-servable", str(missing), str(dst)],
                            capture_output=True, text=True, env=ENV, timeout=600)
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
    dst.mkdir()
    (dst / "old_file").write_text("old")
    code, _, err = run_make_servable(capsys, small_export, dst)
    assert code == 2
    assert_one_error(err, dst, "already exists; pass --overwrite")
    assert [p.name for p in dst.iterdir()] == ["old_file"]
    code, out, _ = run_make_servable(capsys, small_export, dst, "--overwrite", "--no-verify")
    assert code == 0 and "verify: skipped" in out
    assert not (dst / "old_file").exists() and (dst / "saved_model.pb").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst"]  # no staging folders left


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
