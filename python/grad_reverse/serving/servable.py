"""make_servable: a copy of a SavedModel that stock TF Serving can serve.

Steps: validate SRC; copy it into a temporary folder beside DST; rewrite
GradReverse/GradReverseGrad there (rewrite.py); check that every signature
runs only stock ops (check.py); run every signature of SRC and of the copy on
the same inputs and require bitwise-equal outputs (verify.py); only then
rename the folder to DST. SRC is only read. An interrupted or failed run
leaves no DST (at worst a hidden `.DST.make-servable-*` folder after a kill).

DST is for inference: its functions no longer reverse gradients. Keep SRC
for training or fine-tuning.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, TextIO

from grad_reverse.serving import rewrite
from grad_reverse.serving.check import SERVING_TAG, meta_graph_op_types, stock_op_types
from grad_reverse.serving.saved_model_dir import (
    PathLike,
    SavedModelError,
    check_variables,
    read_saved_model,
    refresh_fingerprint,
    saved_model_file,
    write_saved_model,
)


class NotServableError(ValueError):
    """The rewritten copy failed its check or its verification run; DST was not written."""


@dataclass
class ServableReport:
    """What make_servable did: changes per MetaGraph, and the proof it ran."""

    src: str
    dst: str
    changes: list = field(default_factory=list)  # rewrite.MetaGraphChanges
    verified: list = field(default_factory=list)  # verify.SignatureResult

    @property
    def replaced(self) -> int:
        return sum(c.total() for c in self.changes)


def make_servable(
    src: PathLike,
    dst: PathLike,
    *,
    overwrite: bool = False,
    verify: bool = True,
    check: bool = True,
    out: Optional[TextIO] = None,
) -> ServableReport:
    """Copies the SavedModel `src` to `dst` with every GradReverse replaced by stock ops.

    `GradReverse(x, lambda)` becomes `Identity(x)` (lambda dropped) and
    `GradReverseGrad(dy, lambda)` becomes `dy * -lambda` with the kernel's
    rounding, in the top-level graph and in every library function, in every
    MetaGraph. Signatures, variables, assets and the object graph are copied
    unchanged. Then DST is checked for stock ops only and, with `verify`,
    every signature of the `serve` MetaGraph is run on SRC (here) and DST (in
    a process without the op library) and must give bitwise-equal outputs.
    Prints what it did to `out` (stdout by default). `check=False` skips the
    stock-op check, for callers that run `check_serving` themselves.

    Raises SavedModelError (src is not a usable SavedModel, dst exists without
    `overwrite`, ...) or NotServableError (check or verification failed); in
    both cases `dst` is left as it was.
    """
    out = out or sys.stdout
    src_path, dst_path = Path(src), Path(dst)
    proto = read_saved_model(src_path)
    check_variables(src_path, proto)
    _check_destination(src_path, dst_path, overwrite)
    try:
        changes = rewrite.rewrite_saved_model(proto)
    except ValueError as error:  # a node this rewriter does not understand
        raise SavedModelError(src, f"cannot rewrite: {error}") from None
    report = ServableReport(str(src), str(dst), changes=changes)
    print(f"make-servable: {src} -> {dst}", file=out)
    _print_changes(report, out)

    dst_path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dst_path.name}.make-servable-", dir=dst_path.parent))
    try:
        shutil.copytree(src_path, staging, dirs_exist_ok=True)
        if report.replaced:
            write_saved_model(proto, staging / saved_model_file(src_path).name)
            print(f"wrote {saved_model_file(src_path).name}; {refresh_fingerprint(staging)}", file=out)
        if check:
            _check_stock_ops(proto, out)
        if verify:
            report.verified = _verify(src_path, staging, proto, out)
        else:
            print("verify: skipped (--no-verify)", file=out)
        _move_into_place(staging, dst_path)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    print(f"OK: {dst} holds only stock TensorFlow ops; stock TF Serving can serve it.", file=out)
    return report


def _check_destination(src: Path, dst: Path, overwrite: bool) -> None:
    source, target = src.resolve(), dst.resolve()
    if target == source or source in target.parents or target in source.parents:
        raise SavedModelError(dst, f"DST must be outside SRC ({src}) and must not contain it; SRC is never written")
    if dst.exists() or dst.is_symlink():
        if not overwrite:
            raise SavedModelError(dst, "already exists; pass --overwrite (overwrite=True) to replace it")
        if not dst.is_dir() or dst.is_symlink():
            raise SavedModelError(dst, "exists and is not a directory; not replacing it")


def _print_changes(report: ServableReport, out: TextIO) -> None:
    if not report.replaced:
        print("no GradReverse or GradReverseGrad nodes: copied unchanged (already servable)", file=out)
        return
    for changes in report.changes:
        if not changes.places:
            continue
        summary = ", ".join(
            f"{changes.total(op)} {op}" for op in rewrite.REPLACED_OP_TYPES if changes.total(op)
        )
        print(f"MetaGraph {changes.tags}: replaced {summary} in {len(changes.places)} place(s):", file=out)
        for place, counts in sorted(changes.places.items()):
            parts = ", ".join(f"{counts[op]} {op}" for op in rewrite.REPLACED_OP_TYPES if counts[op])
            print(f"  {place}: {parts}", file=out)
    print("(GradReverse became Identity(x), lambda dropped; GradReverseGrad became dy * -lambda, rounded like the kernel)", file=out)


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
            "signatures still need op types stock TF Serving lacks (not ours, so not rewritten): "
            + "; ".join(failures)
        )


def _verify(src: Path, staging: Path, proto, out: TextIO) -> list:
    from grad_reverse.serving import verify

    serving = [m for m in proto.meta_graphs if set(m.meta_info_def.tags) == {SERVING_TAG}]
    if not serving:
        print(f"verify: no MetaGraph tagged ['{SERVING_TAG}']; nothing run", file=out)
        return []
    try:
        results = verify.verify(src, staging, serving[0], [SERVING_TAG])
    except RuntimeError as error:  # a model that does not load at all, with or without the op
        raise NotServableError(f"verify: {error}") from None
    for result in results:
        print(f"verify: signature '{result.key}': {result.status}: {result.detail}", file=out)
    failed = [r.key for r in results if not r.ok]
    if failed:
        raise NotServableError(f"signatures {failed} do not give the same outputs as SRC; DST not written")
    print("verify: SRC ran with the op library, DST in a process that never loaded it", file=out)
    return results


def _move_into_place(staging: Path, dst: Path) -> None:
    if not dst.exists():
        os.replace(staging, dst)
        return
    # A directory cannot be replaced in one rename: move the old one aside first.
    old = Path(tempfile.mkdtemp(prefix=f".{dst.name}.old-", dir=dst.parent))
    os.replace(dst, old / dst.name)
    try:
        os.replace(staging, dst)
    except OSError:
        os.replace(old / dst.name, dst)  # put the old export back before failing
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
