"""`make-servable --overwrite` swaps DST in two renames; an interrupt between them must not lose it.

The previous DST is moved into `.DST.old-XXXXXXXX`, then the new copy is
renamed to DST. Here the second rename is made to raise KeyboardInterrupt
(Ctrl-C at the worst moment), alone and together with a failing restore:
the previous DST must come back, or stay in the old folder, with its files.
"""

import io
import os
from pathlib import Path

import pytest

from grad_reverse import serving
from helpers.serving import hidden


@pytest.fixture
def previous_dst(tmp_path, small_export):
    dst = tmp_path / "out"
    serving.make_servable(small_export, dst, verify=False, out=io.StringIO())
    (dst / "previous.txt").write_text("the export being replaced")
    return dst


def failing_renames(monkeypatch, failures: dict):
    """os.replace whose n-th call (1-based) raises failures[n]; the others rename."""
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) in failures:
            raise failures[len(calls)]
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return calls


def test_interrupt_between_the_renames_puts_the_previous_dst_back(monkeypatch, previous_dst, small_export):
    calls = failing_renames(monkeypatch, {2: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        serving.make_servable(small_export, previous_dst, overwrite=True, verify=False, out=io.StringIO())
    assert [dst for _, dst in calls] == ["out", "out", "out"]  # aside, the new copy (interrupted), back
    assert (previous_dst / "previous.txt").read_text() == "the export being replaced"
    assert (previous_dst / "saved_model.pb").is_file()
    assert hidden(previous_dst.parent) == []  # the old folder and the new copy are both gone


def test_failed_restore_after_an_interrupt_keeps_the_previous_dst_in_the_old_folder(
    monkeypatch, previous_dst, small_export
):
    failing_renames(monkeypatch, {2: KeyboardInterrupt(), 3: PermissionError(13, "Permission denied")})
    with pytest.raises(serving.SavedModelError, match="could not put the previous out back") as caught:
        serving.make_servable(small_export, previous_dst, overwrite=True, verify=False, out=io.StringIO())
    assert not previous_dst.exists()
    [old] = hidden(previous_dst.parent)
    assert old.startswith(".out.old-") and f"kept in {previous_dst.parent / old / 'out'}" in str(caught.value)
    kept = previous_dst.parent / old / "out"
    assert (kept / "previous.txt").read_text() == "the export being replaced"
    assert (kept / "saved_model.pb").is_file()

    # A later run while DST is missing must not take the old folder for stale.
    monkeypatch.undo()
    serving.make_servable(small_export, previous_dst, verify=False, out=io.StringIO())
    assert (kept / "previous.txt").is_file()
