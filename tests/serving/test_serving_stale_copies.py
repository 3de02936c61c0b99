"""Hidden copies that killed make-servable runs leave beside DST.

A run writes into `.DST.make-servable-XXXXXXXX` and renames it to DST. Here
real child processes are stopped while their copy exists: one killed
(SIGKILL, no cleanup of any kind), one still running. A later run for the
same DST must remove the dead run's copy, say so, and leave the live run's
alone; once that run is killed too (SIGTERM), the next run removes its copy.
Only folders holding make-servable's owner marker, written on this host, are
removed: a user's same-named backup and another host's folder are kept.
"""

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grad_reverse import serving
from grad_reverse.serving import staging
from helpers.serving import hidden, run_make_servable

# A make-servable run that stops, printing "staged", once its copy of SRC is written.
STOPPED_RUN = """
import sys, time
from grad_reverse.serving import servable

def stop(*args, **kwargs):
    print("staged", flush=True)
    time.sleep(600)

servable._check_stock_ops = stop
servable.make_servable(sys.argv[1], sys.argv[2], out=sys.stderr)
"""


def start_stopped_run(src: Path, dst: Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", STOPPED_RUN, str(src), str(dst)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    line = child.stdout.readline()  # blocks until the copy exists (or the child dies)
    assert line.strip() == "staged", f"the child run did not get to its copy (exit {child.poll()})"
    return child


def test_stale_copy_of_a_killed_run_is_removed_and_a_live_runs_is_kept(capsys, tmp_path, small_export):
    dst = tmp_path / "out"
    live = start_stopped_run(small_export, dst)
    try:
        [live_copy] = hidden(tmp_path)
        killed = start_stopped_run(small_export, dst)  # it too must leave the live copy alone
        try:
            [stale] = [name for name in hidden(tmp_path) if name != live_copy]
            assert (tmp_path / stale / "saved_model.pb").is_file()  # a full copy of SRC
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=60)
        finally:
            killed.kill()
        assert hidden(tmp_path) == sorted([live_copy, stale])  # SIGKILL: the copy stays behind

        code, out, _ = run_make_servable(capsys, small_export, dst, "--no-verify")
        assert code == 0 and (dst / "saved_model.pb").is_file()
        assert f"removed stale {stale} (" in out
        assert live_copy not in out
        assert hidden(tmp_path) == [live_copy]  # the running one's copy, untouched
        assert (tmp_path / live_copy / "saved_model.pb").is_file()
        live.send_signal(signal.SIGTERM)
        live.wait(timeout=60)
    finally:
        live.kill()
    assert hidden(tmp_path) == [live_copy]  # SIGTERM: no cleanup either

    code, out, _ = run_make_servable(capsys, small_export, dst, "--no-verify", "--overwrite")
    assert code == 0 and f"removed stale {live_copy} (" in out
    assert hidden(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def made_by_make_servable(folder: Path, host: str = socket.gethostname()) -> Path:
    """A folder as a make-servable run on `host` leaves it: created, marked, then the run died."""
    folder.mkdir()
    owner = {"host": host, "pid": 12345, "started": 0.0}
    (folder / staging.OWNER_MARKER).write_text(json.dumps(owner))
    (folder / "saved_model.pb").write_bytes(b"copy")
    return folder


def test_only_this_dsts_hidden_folders_are_removed(capsys, tmp_path, small_export):
    dst = tmp_path / "out"
    others = [
        ".out2.make-servable-abcd1234",  # another DST's
        ".out.make-servable-abcd12345",  # not the pattern
        ".out.keras-export-abcd12",  # not the pattern
    ]
    for name in others:
        made_by_make_servable(tmp_path / name)
    made_by_make_servable(tmp_path / ".out.old-abcd1234")  # the previous DST: kept while DST is missing
    (tmp_path / ".out.make-servable-file0000").write_text("a file, not a folder")
    made_by_make_servable(tmp_path / ".out.make-servable-old_0000")  # a tempfile-style name: stale
    made_by_make_servable(tmp_path / ".out.keras-export-abcd1234")  # a killed export_serving's: stale
    code, out, _ = run_make_servable(capsys, small_export, dst, "--no-verify")
    assert code == 0
    assert "removed stale .out.make-servable-old_0000 (" in out and "removed stale .out.keras-export-abcd1234 (" in out
    assert out.count("removed stale") == 2
    assert hidden(tmp_path) == sorted([*others, ".out.old-abcd1234", ".out.make-servable-file0000"])
    assert not (dst / staging.OWNER_MARKER).exists()  # the marker stays out of DST

    # With DST in place, the old copy of a killed --overwrite run is stale too.
    code, out, _ = run_make_servable(capsys, small_export, dst, "--no-verify", "--overwrite")
    assert code == 0 and "removed stale .out.old-abcd1234 (" in out and out.count("removed stale") == 1
    assert not (dst / staging.OWNER_MARKER).exists()


def test_folders_without_the_marker_or_from_another_host_are_kept(capsys, tmp_path, small_export):
    dst = tmp_path / "model"
    dst.mkdir()  # so that old-folders count as stale too
    users = [tmp_path / ".model.old-20241130", tmp_path / ".model.make-servable-mybackup"]
    for folder in users:  # a user's own backups, named like make-servable's folders
        folder.mkdir()
        (folder / "saved_model.pb").write_bytes(b"the user's")
    remote = made_by_make_servable(tmp_path / ".model.make-servable-0123abcd", host="another-host.invalid")
    killed = made_by_make_servable(tmp_path / ".model.old-4567cdef")
    code, out, _ = run_make_servable(capsys, small_export, dst, "--no-verify", "--overwrite")
    assert code == 0
    assert f"removed stale {killed.name} (" in out and out.count("removed stale") == 1
    assert f"kept {remote.name}: made by a make-servable run on host another-host.invalid (pid 12345)" in out
    assert all((folder / "saved_model.pb").read_bytes() == b"the user's" for folder in users)
    assert hidden(tmp_path) == sorted(p.name for p in [*users, remote])


def test_a_stale_folder_that_cannot_be_removed_is_reported_and_the_run_goes_on(
    capsys, monkeypatch, tmp_path, small_export
):
    stuck = made_by_make_servable(tmp_path / ".out.make-servable-0123abcd")
    gone = made_by_make_servable(tmp_path / ".out.make-servable-4567cdef")
    real_rmtree = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        if Path(path) == stuck:
            raise PermissionError(13, "Permission denied", str(path))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    code, out, _ = run_make_servable(capsys, small_export, tmp_path / "out", "--no-verify")
    assert code == 0 and (tmp_path / "out" / "saved_model.pb").is_file()
    assert f"could not remove stale {stuck.name}: Permission denied" in out
    assert f"removed stale {gone.name} (" in out
    assert hidden(tmp_path) == [stuck.name]


def test_without_working_locks_nothing_is_removed(capsys, monkeypatch, tmp_path, small_export):
    class NoFlock:  # a file system that refuses flock, as some network ones do
        LOCK_EX, LOCK_SH, LOCK_NB = 2, 1, 4

        @staticmethod
        def flock(fd, operation):
            raise OSError(37, "No locks available")

    monkeypatch.setattr(staging, "fcntl", NoFlock)
    made_by_make_servable(tmp_path / ".out.make-servable-abcd1234")
    code, out, _ = run_make_servable(capsys, small_export, tmp_path / "out", "--no-verify")
    assert code == 0 and "removed stale" not in out
    assert hidden(tmp_path) == [".out.make-servable-abcd1234"]


def test_lock_probe_tries_the_exclusive_lock_the_run_takes(monkeypatch, tmp_path):
    class SharedOnly:  # a file system that grants shared locks but refuses exclusive ones
        LOCK_EX, LOCK_SH, LOCK_NB = 2, 1, 4

        @staticmethod
        def flock(fd, operation):
            if operation & SharedOnly.LOCK_EX:
                raise OSError(37, "No locks available")

    monkeypatch.setattr(staging, "fcntl", SharedOnly)
    with staging._parent_locked(tmp_path) as locked:
        assert not locked


def test_a_run_removes_its_own_copy_when_it_fails(tmp_path, small_export, monkeypatch):
    from grad_reverse.serving import servable

    def fail(*args, **kwargs):
        raise servable.NotServableError("made to fail")

    monkeypatch.setattr(servable, "_check_stock_ops", fail)
    with pytest.raises(servable.NotServableError):
        serving.make_servable(small_export, tmp_path / "out", out=io.StringIO())
    assert list(tmp_path.iterdir()) == []


# An export_serving run that stops, printing "exported", once Keras' export is written.
STOPPED_EXPORT = """
import sys, time
from grad_reverse.serving import servable
from helpers.serving import keras_dann

def stop(*args, **kwargs):
    print("exported", flush=True)
    time.sleep(600)

servable.make_servable = stop
from grad_reverse.serving import export_serving
export_serving(keras_dann(), sys.argv[1])
"""


def test_the_keras_export_of_a_killed_export_serving_is_removed_by_the_next_run(tmp_path):
    from helpers.serving import keras_dann

    dst = tmp_path / "served"
    child = subprocess.Popen(
        [sys.executable, "-c", STOPPED_EXPORT, str(dst)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        # tests/ on the path, for `helpers`, after what this process has (the package under test).
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join([*sys.path])),
    )
    try:
        assert child.stdout.readline().strip() == "exported", f"the child did not export (exit {child.poll()})"
        [left] = hidden(tmp_path)
        assert left.startswith(".served.keras-export-")
        assert (tmp_path / left / "saved_model" / "saved_model.pb").is_file()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        child.kill()
    assert hidden(tmp_path) == [left]  # SIGKILL: no cleanup of any kind

    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        serving.export_serving(keras_dann(), dst, verbose=True)
    assert f"removed stale {left} (" in report.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["served"]
    assert (dst / "saved_model.pb").is_file()


def test_sibling_pattern_names_only_this_dst():
    pattern = staging.sibling_pattern(Path("a/m.v1"), staging.STAGING)
    assert pattern.match(".m.v1.make-servable-0123abcd")
    assert not pattern.match(".mXv1.make-servable-0123abcd")  # the dot is literal
    assert not pattern.match(".m.v1.make-servable-0123abcd.make-servable-0123abcd")
