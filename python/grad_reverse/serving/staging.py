"""The hidden sibling folders make-servable writes in, and the ones killed runs left.

make-servable builds DST in a hidden sibling, `.DST.make-servable-XXXXXXXX`,
and renames it into place, so DST never appears half-written. A run killed by
SIGKILL or SIGTERM gets no chance to remove that sibling (a full copy of the
SavedModel), and every retry would add one more. So each run holds an
exclusive `flock` on its sibling for as long as it exists; the kernel drops
the lock when the process dies, however it dies. A later run for the same DST
removes every such sibling it can lock (no live process owns it) and leaves
the ones it cannot (another run is writing them).

Creating a sibling and looking for stale ones happen under a lock on the
parent folder, so a new run's sibling is locked before any other run can see
it. `.DST.old-XXXXXXXX` (the previous DST while `--overwrite` swaps it) is
removed the same way, but only while DST exists: a run killed between its two
renames leaves DST missing, and the old folder is then the only copy.

Where `fcntl` is missing (not POSIX) or the file system refuses `flock`
(some network file systems), nothing is locked or removed: a folder whose
owner cannot be told is left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Iterator, Optional

try:
    import fcntl
except ImportError:  # not POSIX: no flock, so no safe way to tell a live run's folder
    fcntl = None  # type: ignore[assignment]

STAGING, OLD = "make-servable", "old"
# tempfile.mkdtemp's eight characters (earlier versions of make-servable) or
# the hex ones made here.
_SUFFIX = "[a-z0-9_]{8}"


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


def _locks_work(parent: Path) -> bool:
    """Whether `flock` works in `parent` (some network file systems refuse it)."""
    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:  # another run holds the parent: locks work
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the lock
    return True


@contextlib.contextmanager
def _parent_locked(parent: Path) -> Iterator[None]:
    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held for milliseconds: a scan and a mkdir
        yield
    finally:
        os.close(fd)  # closing drops the lock


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _remove_stale(dst: Path) -> list[str]:
    """Removes DST's siblings that no live process owns; returns what it removed, one line each."""
    kinds = [STAGING] + ([OLD] if dst.is_dir() else [])
    patterns = [sibling_pattern(dst, kind) for kind in kinds]
    removed = []
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
            size = _size(path)
            shutil.rmtree(path)
            removed.append(f"{path.name} ({size / 1e6:.1f} MB)")
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def claimed_sibling(dst: Path, kind: str, removed: Optional[list] = None) -> Iterator[Path]:
    """A new, empty hidden sibling of `dst`, locked while the context lasts and removed after it.

    Before making it, removes the stale siblings of `dst` (see the module
    text) and appends what it removed to `removed`. If the folder was renamed
    away inside the context (into DST), nothing is removed at the end.
    """
    parent = dst.parent
    fd = None
    if fcntl is None or not _locks_work(parent):
        path = _make_folder(parent, dst.name, kind)
    else:
        with _parent_locked(parent):
            stale = _remove_stale(dst)
            path = _make_folder(parent, dst.name, kind)
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)  # new and unseen by others: never waits
        if removed is not None:
            removed.extend(stale)
    try:
        yield path
    finally:
        try:
            if path.exists():
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
