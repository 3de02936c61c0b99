"""Reading, validating and writing a SavedModel directory's files.

Every problem with a directory is a `SavedModelError` whose text names the
path once and says what is wrong, so the command line can print it as one
line. The one private TensorFlow API the package uses for SavedModels
(recomputing `fingerprint.pb`) is here too, in `refresh_fingerprint`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import saved_model_pb2

from grad_reverse.serving.constants import SAVED_MODEL_FILES

PathLike = str | os.PathLike
BINARY_NAME, TEXT_NAME = SAVED_MODEL_FILES
# Op types that create variables; a graph holding one needs the variables folder.
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable", "AutoReloadVariable"})
_SHARD = re.compile(r"^variables\.data-(\d+)-of-(\d+)$")


class SavedModelError(ValueError):
    """A path that is not a usable SavedModel (or not a usable destination).

    `str(error)` is "PATH: what is wrong", the path named once; `for_cli()`
    says the same with the command line's flags instead of Python keywords.

    Args:
      path: the path that is wrong.
      reason: what is wrong, in Python's words (keywords such as `overwrite=True`).
      cli_reason: the same in the command line's words (`--overwrite`); default: `reason`.
    """

    def __init__(self, path: PathLike, reason: str, cli_reason: str = "") -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason
        # The same reason with command-line flags where `reason` names Python keywords.
        self.cli_reason = cli_reason or reason

    def for_cli(self) -> str:
        """ "PATH: what is wrong", worded for the command line."""
        return f"{self.path}: {self.cli_reason}"


def saved_model_file(path: PathLike) -> Path:
    """The `saved_model.pb` (or `.pbtxt`) of the directory `path`."""
    directory = Path(path)
    if not directory.exists():
        raise SavedModelError(path, "no such directory")
    if not directory.is_dir():
        raise SavedModelError(path, "not a directory (a SavedModel is a directory)")
    for name in (BINARY_NAME, TEXT_NAME):  # the loader prefers the binary one
        if (directory / name).is_file():
            return directory / name
        if (directory / name).exists():
            raise SavedModelError(path, f"{name} is not a regular file (a directory?)")
    raise SavedModelError(path, f"not a SavedModel directory: it has no {BINARY_NAME} (or {TEXT_NAME})")


def read_saved_model(path: PathLike) -> saved_model_pb2.SavedModel:
    """The SavedModel proto of the export directory `path`.

    Raises SavedModelError if there is no such directory, no saved_model.pb,
    or the file does not parse as a SavedModel with at least one MetaGraph.

    Args:
      path: the export directory.
    """
    file = saved_model_file(path)
    proto = saved_model_pb2.SavedModel()
    try:
        if file.name == BINARY_NAME:
            proto.ParseFromString(file.read_bytes())
        else:
            text_format.Parse(file.read_text(), proto)
    except (DecodeError, text_format.ParseError, UnicodeDecodeError) as error:
        raise SavedModelError(
            path, f"{file.name} is corrupt or truncated (it does not parse as a SavedModel: {error})"
        ) from None
    # A file cut at a field boundary can still parse; an empty proto is the usual result.
    if not proto.meta_graphs or not any(m.graph_def.node for m in proto.meta_graphs):
        raise SavedModelError(path, f"{file.name} is corrupt or truncated (it holds no graph)")
    return proto


def check_variables(path: PathLike, proto: saved_model_pb2.SavedModel) -> None:
    """Raises SavedModelError if the graph has variables but their files are missing.

    TensorFlow's loader skips the restore when `variables/variables.index` is
    missing, and the model then fails at its first request (uninitialized
    variables); better to say so before copying it anywhere.
    """
    has_variables = any(
        node.op in VARIABLE_OPS for meta_graph in proto.meta_graphs for node in meta_graph.graph_def.node
    )
    if not has_variables:
        return
    variables = Path(path) / "variables"
    if not (variables / "variables.index").is_file():
        reason = "has no variables folder" if not variables.is_dir() else "has no variables/variables.index"
        raise SavedModelError(path, f"{reason}, but its graph has variables (an incomplete copy?)")
    shards = [m for m in (_SHARD.match(p.name) for p in variables.iterdir()) if m]
    expected = {int(m.group(2)) for m in shards} or {1}
    if len(expected) != 1 or len(shards) != expected.pop():
        raise SavedModelError(path, "variables/ is missing some of its variables.data-* shards")


def write_saved_model(proto: saved_model_pb2.SavedModel, file: Path) -> None:
    """Writes `proto` to `file`, binary or text as the file name says."""
    if file.name == TEXT_NAME:
        file.write_text(text_format.MessageToString(proto))
    else:
        file.write_bytes(proto.SerializeToString(deterministic=True))


def refresh_fingerprint(directory: Path) -> str:
    """Recomputes `fingerprint.pb` after saved_model.pb changed; returns what was done.

    The fingerprint holds a checksum of saved_model.pb; a stale one would
    misidentify the model to tools that read it. TensorFlow computes it with a
    private function (checked on 2.15-2.21); where that is missing the stale
    file is removed, as loaders accept SavedModels without one.
    """
    fingerprint = directory / "fingerprint.pb"
    if not fingerprint.exists():
        return "no fingerprint.pb"
    try:
        from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

        fingerprint.write_bytes(fingerprinting.CreateFingerprintDef(str(directory)))
        return "fingerprint.pb recomputed"
    except (ImportError, AttributeError):
        fingerprint.unlink()
        return "fingerprint.pb removed (this TensorFlow cannot recompute it)"
