"""The hidden sibling folders make-servable writes in, and the ones killed runs left.

make-servable builds DST in a hidden sibling, `.DST.make-servable-XXXXXXXX`,
and renames it into place, so DST never appears half-written. A run killed by
SIGKILL or SIGTERM gets no chance to remove that sibling (a full copy of the
SavedModel), and every retry would add one more. So each run holds an
exclusive `flock` on its sibling for as long as it exists; the kernel drops
the lock when the process dies, however it dies. A later run for the same DST
removes every such sibling it can lock (no live process owns it) and leaves
the ones it cannot (another run is writing them). `export_serving` writes
Keras' export into a third kind, `.DST.keras-export-XXXXXXXX`, claimed and
cleaned up the same way.

Only folders make-servable made are removed: each holds an owner marker,
`OWNER_MARKER` (host name, pid, start time), written while the new folder is
locked. A folder of the same name without it (a user's own
`.model.old-20241130` backup, say) is never touched, and a marked folder made
on another host (a shared file system) is kept and mentioned: its run's lock
cannot be trusted from here.

Creating a sibling and looking for stale ones happen under a lock on the
parent folder, so a new run's sibling is locked before any other run can see
it. `.DST.old-XXXXXXXX` (the previous DST while `--overwrite` swaps it) is
removed the same way, but only while DST exists: a run killed between its two
renames leaves DST missing, and the old folder is then the only copy. For the
same reason an OLD sibling is never removed at the end of its context while
DST is missing.

Where `fcntl` is missing (not POSIX) or the file system refuses `flock`
(some network file systems), nothing is locked or removed: a folder whose
owner cannot be told is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no flock, so no safe way to tell a live run's folder
    fcntl = None  # type: ignore[assignment]

# make-servable's copy being written; the previous DST during --overwrite;
# export_serving's Keras export, the SRC of its make-servable run.
STAGING, OLD, KERAS_EXPORT = "make-servable", "old", "keras-export"
# tempfile.mkdtemp's eight characters (earlier versions of make-servable) or
# the hex ones made here.
_SUFFIX = "[a-z0-9_]{8}"
# Written into every sibling made here; removed from a staging folder just
# before it becomes DST (unmark).
OWNER_MARKER = ".make-servable-owner.json"


def sibling_pattern(dst: Path, kind: str) -> re.Pattern:
    """The names of DST's hidden siblings of `kind` (STAGING or OLD), and of no other DST's."""
    return re.compile(rf"^\.{re.escape(dst.name)}\.{re.escape(kind)}-{_SUFFIX}$")


def _try_lock(fd: int) -> bool:
    """An exclusive lock on `fd` if nobody holds one; False if a live process does."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def _parent_locked(parent: Path) -> Iterator[bool]:
    """Holds the exclusive lock on `parent` that every run takes (for
    milliseconds: a scan and a mkdir) and yields True; yields False, holding
    nothing, where flock is missing or refused there (some network file
    systems)."""
    if fcntl is None:
        yield False
        return
    fd = os.open(parent, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            locked = False
        else:
            locked = True
        yield locked
    finally:
        os.close(fd)  # closing drops the lock


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _write_marker(path: Path) -> None:
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    (path / OWNER_MARKER).write_text(json.dumps(owner))


def _owner(path: Path) -> dict | None:
    """The marker make-servable wrote into `path`, or None (not one of its folders)."""
    try:
        owner = json.loads((path / OWNER_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) and isinstance(owner.get("host"), str) else None


def unmark(path: Path) -> None:
    """Removes the owner marker from a staging folder about to become DST."""
    with contextlib.suppress(FileNotFoundError):
        (path / OWNER_MARKER).unlink()


def _remove_stale(dst: Path) -> list[str]:
    """Removes DST's siblings that a dead make-servable run on this host left; returns one line per finding."""
    kinds = [STAGING, KERAS_EXPORT] + ([OLD] if dst.is_dir() else [])
    patterns = [sibling_pattern(dst, kind) for kind in kinds]
    lines = []
    for path in sorted(dst.parent.iterdir()):
        if not any(p.match(path.name) for p in patterns) or path.is_symlink() or not path.is_dir():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # vanished (its run just finished) or unreadable: not ours to judge
            continue
        try:
            if not _try_lock(fd):
                continue  # a live run holds it
            owner = _owner(path)
            if owner is None:
                continue  # not made by make-servable (a user's backup, say): never ours to remove
            if owner["host"] != socket.gethostname():
                lines.append(
                    f"kept {path.name}: made by a make-servable run on host {owner['host']} "
                    f"(pid {owner.get('pid')}), which cannot be checked from here; remove it by hand if that run is over"
                )
                continue
            size = _size(path)
            try:
                shutil.rmtree(path)
            except OSError as error:  # another user's folder in a shared directory, say
                lines.append(f"could not remove stale {path.name}: {error.strerror or error}")
                continue
            lines.append(
                f"removed stale {path.name} ({size / 1e6:.1f} MB): "
                f"left by a make-servable run of {dst.name} that no longer runs"
            )
        finally:
            os.close(fd)
    return lines


@contextlib.contextmanager
def claimed_sibling(dst: Path, kind: str, notes: list | None = None, remove_stale: bool = True) -> Iterator[Path]:
    """A new hidden sibling of `dst`, marked, locked while the context lasts and removed after it.

    Before making it, with `remove_stale`, removes the stale siblings of
    `dst` (see the module text) and appends one line per stale folder
    removed, kept or not removable to `notes`. If the folder was renamed away inside the context
    (into DST), nothing is removed at the end; an OLD folder is kept while
    DST is missing (it may hold the only copy of the previous DST).
    """
    parent = dst.parent
    fd = None
    with _parent_locked(parent) as locked:
        if locked:
            stale = _remove_stale(dst) if remove_stale else []
            path = _make_folder(parent, dst.name, kind)
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)  # new and unseen by others: never waits
            _write_marker(path)  # under the parent lock: no run sees it unmarked
        else:  # no locks: no run can tell a stale folder from a live one, so none is removed
            stale = []
            path = _make_folder(parent, dst.name, kind)
            _write_marker(path)
    if notes is not None:
        notes.extend(stale)
    try:
        yield path
    finally:
        try:
            dst_missing = not (dst.exists() or dst.is_symlink())
            if path.exists() and not (kind == OLD and dst_missing):
                shutil.rmtree(path, ignore_errors=True)
        finally:
            if fd is not None:
                os.close(fd)


def _make_folder(parent: Path, name: str, kind: str) -> Path:
    while True:
        path = parent / f".{name}.{kind}-{secrets.token_hex(4)}"
        try:
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:  # one chance in four billion; draw again
            continue
