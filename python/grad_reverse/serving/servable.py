"""make_servable: a copy of a SavedModel that stock TF Serving can serve.

Steps: validate SRC; copy it into a hidden folder beside DST (staging.py,
which also removes the ones killed runs left); rewrite GradReverse and
GradReverseGrad there (rewrite.py); check that every signature runs only
stock ops (check.py); run every signature of every MetaGraph holding the
`serve` tag on SRC and on the copy with the same inputs and require
bitwise-equal outputs (verify.py); only then rename the folder to DST.

The gate: a signature whose outputs differ, or that runs on one side only,
stops the run (NotServableError). A signature that could not be run at all
(inputs it cannot generate, strings say) proves nothing, so it stops the run
too (UnverifiedError), unless the caller allows unverified signatures; the
final line then says which were not run. SRC is only read; a failed or
interrupted run leaves no new DST, and with `overwrite` the previous DST
stays (put back, or kept in its `.DST.old-` folder if even that fails).

DST is for inference: its functions no longer reverse gradients. Keep SRC
for training or fine-tuning.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from grad_reverse.serving import destination, integrity, rewrite
from grad_reverse.serving import staging as staging_folder
from grad_reverse.serving.check import meta_graph_op_types, stock_op_types
from grad_reverse.serving.constants import SERVING_TAG
from grad_reverse.serving.saved_model_dir import (
    PathLike,
    SavedModelError,
    read_saved_model,
    refresh_fingerprint,
    saved_model_file,
    write_saved_model,
)


class NotServableError(ValueError):
    """The rewritten copy failed its check or its verification run; DST was not written."""


class UnverifiedError(NotServableError):
    """Some signature could not be run, so DST's equality to SRC is unproven; DST was not written."""


@dataclass
class ServableReport:
    """What make_servable did: changes per MetaGraph, and the proof it ran.

    Attributes:
      src: the SavedModel read.
      dst: the SavedModel written.
      changes: what was replaced, per MetaGraph.
      verified: the signatures run on both and compared (with their status).
      unverified: the signatures that could not be run."""

    src: str
    dst: str
    changes: list = field(default_factory=list)  # rewrite.MetaGraphChanges
    verified: list = field(default_factory=list)  # verify.SignatureResult, every serving MetaGraph's
    unverified: list = field(default_factory=list)  # str: what was not run, and why

    @property
    def replaced(self) -> int:
        return sum(c.total() for c in self.changes)


def make_servable(
    src: PathLike,
    dst: PathLike,
    *,
    overwrite: bool = False,
    overwrite_any_directory: bool = False,
    verify: bool = True,
    allow_unverified: bool = False,
    check: bool = True,
    out: TextIO | None = None,
) -> ServableReport:
    """Copies the SavedModel `src` to `dst` with every GradReverse replaced by stock ops.

    `GradReverse(x, lambda)` becomes `Identity(x)` (lambda dropped) and
    `GradReverseGrad(dy, lambda)` becomes `dy * -lambda` with the kernel's
    rounding, in the top-level graph and in every library function, in every
    MetaGraph. Signatures, variables, assets and the object graph are copied
    unchanged. Then DST is checked for stock ops only and, with `verify`,
    every signature of every MetaGraph holding the `serve` tag is run on SRC
    (here) and DST (in a process without the op library) and must give
    bitwise-equal outputs. A signature that cannot be run (no inputs can be
    generated for it) stops the run unless `allow_unverified`; `verify=False`
    runs none. Prints what it did to `out` (stdout by default), ending with a
    line that says what was proven. `check=False` skips the stock-op check,
    for callers that run `check_serving` themselves. Stale hidden copies that
    killed runs for the same `dst` left beside it are removed (and named).
    `overwrite` replaces an existing `dst` only if it is a SavedModel (an
    earlier copy) or an empty directory; `overwrite_any_directory` replaces
    any directory, with every file in it.

    Args:
      src: the SavedModel to read.
      dst: the directory to write.
      overwrite: replace an existing `dst` that is a SavedModel or empty.
      overwrite_any_directory: replace any directory at `dst`.
      verify: run every `serve` signature on both and compare.
      allow_unverified: go on when a signature cannot be run.
      check: check `dst` for stock ops only.
      out: where the report is printed (default: stdout).

    Raises SavedModelError (src is not a usable SavedModel or a file of it is
    damaged, dst exists without `overwrite`, ...), NotServableError (check or verification failed) or its
    subclass UnverifiedError (a signature was not run); in each case `dst` is
    left as it was.
    """
    out = out or sys.stdout
    src_path, dst_path = Path(src), Path(dst)
    proto = read_saved_model(src_path)
    integrity.check_whole(src_path, proto)
    _check_destination(src_path, dst_path, overwrite or overwrite_any_directory, overwrite_any_directory)
    try:
        changes = rewrite.rewrite_saved_model(proto)
    except ValueError as error:  # a node this rewriter does not understand
        raise SavedModelError(src, f"cannot rewrite: {error}") from None
    report = ServableReport(str(src), str(dst), changes=changes)
    print(f"make-servable: {src} -> {dst}", file=out)
    _print_changes(report, out)

    dst_path.parent.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with staging_folder.claimed_sibling(dst_path, staging_folder.STAGING, notes) as staging:
        for line in notes:
            print(line, file=out)
        shutil.copytree(src_path, staging, dirs_exist_ok=True)
        if report.replaced:
            write_saved_model(proto, staging / saved_model_file(src_path).name)
            print(f"wrote {saved_model_file(src_path).name}; {refresh_fingerprint(staging)}", file=out)
        if check:
            _check_stock_ops(proto, out)
        if verify:
            _verify(src_path, staging, proto, report, allow_unverified, out)
        else:
            print("verify: skipped (--no-verify)", file=out)
        _move_into_place(staging, dst_path)
    print(_final_line(report, dst, check, verify), file=out)
    return report


def _check_destination(src: Path, dst: Path, overwrite: bool, any_directory: bool) -> None:
    problem = destination.destination_problem(src, dst, overwrite, any_directory)
    if problem:
        reason, cli_reason = problem
        raise SavedModelError(dst, reason, cli_reason=cli_reason)


def _print_changes(report: ServableReport, out: TextIO) -> None:
    if not report.replaced:
        print("no GradReverse or GradReverseGrad nodes: copied unchanged (already servable)", file=out)
        return
    for changes in report.changes:
        if not changes.places:
            continue
        summary = ", ".join(f"{changes.total(op)} {op}" for op in rewrite.REPLACED_OP_TYPES if changes.total(op))
        print(f"MetaGraph {changes.tags}: replaced {summary} in {len(changes.places)} place(s):", file=out)
        for place, counts in sorted(changes.places.items()):
            parts = ", ".join(f"{counts[op]} {op}" for op in rewrite.REPLACED_OP_TYPES if counts[op])
            print(f"  {place}: {parts}", file=out)
    print(
        "(GradReverse became Identity(x), lambda dropped; GradReverseGrad became dy * -lambda, rounded like the kernel)",
        file=out,
    )


def _check_stock_ops(proto, out: TextIO) -> None:
    stock = stock_op_types()
    failures = []
    for meta_graph in proto.meta_graphs:
        tags = sorted(meta_graph.meta_info_def.tags)
        for key, ops in sorted(meta_graph_op_types(meta_graph).items()):
            custom = sorted(ops - stock)
            verdict = f"not stock: {', '.join(custom)}" if custom else "stock only"
            print(f"check: {tags} signature '{key}': {len(ops)} op types, {verdict}", file=out)
            if custom:
                failures.append(f"{tags} '{key}': {', '.join(custom)}")
    if failures:
        raise NotServableError(
            "signatures still need op types stock TF Serving lacks (not ours, so not rewritten): " + "; ".join(failures)
        )


def _verify(src: Path, staging: Path, proto, report: ServableReport, allow_unverified: bool, out: TextIO) -> None:
    from grad_reverse.serving import verify

    for meta_graph in proto.meta_graphs:
        tags = sorted(meta_graph.meta_info_def.tags)
        if SERVING_TAG not in tags:
            print(f"verify: MetaGraph {tags} not run: it does not hold the tag '{SERVING_TAG}'", file=out)
            continue
        try:
            results = verify.verify(src, staging, meta_graph, tags)
        except verify.SourceLoadError as error:  # SRC itself is bad: exit 2, like any bad SRC
            raise SavedModelError(src, f"does not load with TensorFlow ({integrity.first_line(error, src)})") from None
        except RuntimeError as error:  # the copy does not load, though SRC does
            raise NotServableError(f"verify {tags}: {error}") from None
        for result in results:
            print(f"verify: {tags} signature '{result.key}': {result.status}: {result.detail}", file=out)
        report.verified.extend(results)
    if not any(SERVING_TAG in m.meta_info_def.tags for m in proto.meta_graphs):
        report.unverified.append(f"no MetaGraph holds the tag '{SERVING_TAG}', so no signature was run")
    # The gate: DST is written only if no signature differs and every one ran.
    failed = [r for r in report.verified if r.status in (verify.DIFFERENT, verify.FAILED)]
    if failed:
        raise NotServableError(f"signatures {_names(failed)} do not give the same outputs as SRC; DST not written")
    report.unverified.extend(f"{_names([r])} ({r.detail})" for r in report.verified if r.status == verify.NOT_RUN)
    if report.unverified and not allow_unverified:
        raise UnverifiedError(
            f"not proven equal to SRC: {'; '.join(report.unverified)}; DST not written "
            "(--allow-unverified writes it anyway)"
        )
    print("verify: SRC ran with the op library, DST in a process that never loaded it", file=out)


def _names(results: list) -> str:
    return ", ".join(f"{list(r.tags)} '{r.key}'" for r in results)


def _final_line(report: ServableReport, dst: PathLike, check: bool, verify: bool) -> str:
    ops = f"{dst} holds only stock TensorFlow ops" if check else f"{dst} written (stock-op check skipped)"
    if not verify:
        return f"OK, NOT VERIFIED: {ops}; outputs not compared (--no-verify)."
    equal = sum(r.ok for r in report.verified)
    if report.unverified:
        return (
            f"OK, NOT FULLY VERIFIED: {ops}; {equal} signature(s) bitwise equal to SRC, but not run: "
            f"{'; '.join(report.unverified)} (--allow-unverified)."
        )
    return f"OK: {ops}; all {equal} serving signature(s) gave outputs bitwise equal to SRC's; stock TF Serving can serve it."


def _move_into_place(staging: Path, dst: Path) -> None:
    if not dst.exists():
        staging_folder.unmark(staging)  # DST must not carry make-servable's owner marker
        os.replace(staging, dst)
        return
    # A directory cannot be replaced in one rename: move the old one aside first.
    # The OLD folder is removed only once DST exists again (claimed_sibling), so
    # an interrupt or a failed restore leaves the previous DST in it.
    # This run's STAGING claim removed the stale siblings (and said so): not again.
    with staging_folder.claimed_sibling(dst, staging_folder.OLD, remove_stale=False) as old:
        previous = old / dst.name
        os.replace(dst, previous)
        try:
            staging_folder.unmark(staging)
            os.replace(staging, dst)
        except BaseException:  # KeyboardInterrupt too: put the old export back before failing
            if not (dst.exists() or dst.is_symlink()):
                try:
                    os.replace(previous, dst)
                except OSError as error:
                    raise SavedModelError(
                        dst, f"could not put the previous {dst.name} back ({error}); it is kept in {previous}"
                    ) from error
            raise
