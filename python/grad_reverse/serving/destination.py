"""Whether make-servable may write DST: checks of paths only, no TensorFlow.

`servable.make_servable` raises its answer as a SavedModelError; the command
line asks the same question before it loads TensorFlow (`cli`'s preflight),
so a bad DST is reported at once, as a bad SRC is.
"""

from __future__ import annotations

from pathlib import Path

from grad_reverse.serving.constants import SAVED_MODEL_FILES


def destination_problem(src: Path, dst: Path, overwrite: bool, any_directory: bool) -> tuple[str, str] | None:
    """Why `dst` cannot be written: (reason, the same worded for the command line), or None."""
    source, target = src.resolve(), dst.resolve()
    if target == source or source in target.parents or target in source.parents:
        reason = f"DST must be outside SRC ({src}) and must not contain it; SRC is never written"
        return reason, reason
    if not (dst.exists() or dst.is_symlink()):
        return None
    # Checked before `overwrite`, so that the advice never names a flag that
    # would then be refused.
    if not dst.is_dir() or dst.is_symlink():
        reason = "exists and is not a directory; not replacing it: choose another DST"
        return reason, reason
    # --overwrite is for an earlier copy: a folder of other files is someone's work.
    if not any_directory and not is_saved_model(dst) and any(dst.iterdir()):
        reason = (
            f"is not a SavedModel (it holds {listing(dst)}), and overwrite replaces only a SavedModel "
            "or an empty directory; choose another DST, or delete it and its files with {}"
        )
        if not overwrite:
            reason = (
                f"already exists and is not a SavedModel (it holds {listing(dst)}); choose another DST, "
                "or delete it and its files with {}"
            )
        return reason.format("overwrite_any_directory=True"), reason.format("--overwrite-any-directory")
    if not overwrite:
        return "already exists; pass overwrite=True to replace it", "already exists; pass --overwrite to replace it"
    return None


def is_saved_model(directory: Path) -> bool:
    return any((directory / name).is_file() for name in SAVED_MODEL_FILES)


def listing(directory: Path, shown: int = 3) -> str:
    """'readme.txt, data/ and 4 more': what a user would lose."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in directory.iterdir())
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
