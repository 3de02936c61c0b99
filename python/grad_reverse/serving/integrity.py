"""Is a SavedModel whole? The checks both serving commands run before anything else.

A SavedModel whose files were damaged (a truncated copy, a flipped bit, a
hand edit) should be named as a bad SRC, in one line that says which file
and what is wrong, before make-servable copies it or check-serving calls it
servable. These checks only read files (protobufs and the checkpoint, as
TensorFlow's checkpoint reader does); they never load or run the model, so
they are safe on a model you do not trust (docs/serving.md, Security).

Checked here, each raising SavedModelError:
- `fingerprint.pb`, when present, parses (TensorFlow's loader otherwise logs
  a whole traceback and goes on), and its checksum of `saved_model.pb`
  matches the file (a flipped bit that still parses is found here, or only
  by loading the model);
- every function a node calls through a function attribute exists in the
  graph's function library (or is an op);
- the variables: their files exist (saved_model_dir.check_variables), the
  index reads, every tensor reads with a matching checksum, and each variable
  of the saved object graph has the shape and dtype the graph gives it.
"""

from __future__ import annotations

import os
from pathlib import Path

from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import fingerprint_pb2, saved_model_pb2, trackable_object_graph_pb2

from grad_reverse.serving import held_stderr
from grad_reverse.serving.saved_model_dir import BINARY_NAME, PathLike, SavedModelError, check_variables

FINGERPRINT_NAME = "fingerprint.pb"
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"  # the checkpoint's map from object to tensor


def check_whole(path: PathLike, proto: saved_model_pb2.SavedModel) -> None:
    """Raises SavedModelError naming the first damaged file of the SavedModel at `path`."""
    _check_fingerprint(Path(path))
    _check_functions(path, proto)
    check_variables(path, proto)
    _check_variable_contents(Path(path), proto)


def first_line(text, path: PathLike = "") -> str:
    """The first non-empty line of a (TensorFlow) error message, for one-line
    reports; `path` (the SavedModel, which the report names already) left out."""
    line = next((line.strip() for line in str(text).splitlines() if line.strip()), "(no message)")
    if path:
        for spelling in {str(path), str(Path(path).resolve())}:
            line = line.replace(spelling + os.sep, "").replace(spelling, "SavedModel")
    return line


def _check_fingerprint(path: Path) -> None:
    file = path / FINGERPRINT_NAME
    if not file.exists():
        return  # optional: TensorFlow before 2.12 wrote none, and loaders accept its absence
    if not file.is_file():
        raise SavedModelError(path, f"{FINGERPRINT_NAME} is corrupt (it is not a regular file: a directory?)")
    try:
        stored = fingerprint_pb2.FingerprintDef.FromString(file.read_bytes())
    except DecodeError as error:
        raise SavedModelError(
            path,
            f"{FINGERPRINT_NAME} is corrupt (it does not parse: {first_line(error)}); "
            "delete it (loaders accept a SavedModel without one) or export the model again",
        ) from None
    computed = _computed_fingerprint(path)
    if computed is not None and stored.saved_model_checksum != computed.saved_model_checksum:
        raise SavedModelError(
            path,
            f"{BINARY_NAME} does not match the checksum {FINGERPRINT_NAME} holds for it (changed "
            "after the export: a damaged copy?); export the model again, or delete "
            f"{FINGERPRINT_NAME} if the change was meant",
        )


def _computed_fingerprint(path: Path):
    """TensorFlow's fingerprint of the SavedModel as it is now (the private
    function refresh_fingerprint uses); None where it is missing, or for a
    text saved_model.pbtxt, which TensorFlow does not fingerprint."""
    if not (path / BINARY_NAME).is_file():
        return None
    try:
        from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting
    except ImportError:
        return None
    # It logs a warning of its own for a missing or unreadable checkpoint,
    # which _check_variable_contents reports in its own words.
    with held_stderr.stderr_held_back(keep=False):
        try:
            return fingerprint_pb2.FingerprintDef.FromString(fingerprinting.CreateFingerprintDef(str(path)))
        except Exception:  # noqa: BLE001 - a file it cannot read: the checks that follow name it
            return None


def _check_functions(path: PathLike, proto: saved_model_pb2.SavedModel) -> None:
    from tensorflow.python.framework import op_def_registry

    for meta_graph in proto.meta_graphs:
        library = {function.signature.name for function in meta_graph.graph_def.library.function}
        nodes = [(node, "the graph") for node in meta_graph.graph_def.node]
        for function in meta_graph.graph_def.library.function:
            nodes.extend((node, f"function '{function.signature.name}'") for node in function.node_def)
        for node, where in nodes:
            for called in _called_functions(node):
                if called not in library and op_def_registry.get(called) is None:
                    raise SavedModelError(
                        path,
                        f"saved_model.pb: node '{node.name}' in {where} calls function '{called}', "
                        "which is not in the graph's function library (a damaged or edited file?)",
                    )


def _called_functions(node) -> list[str]:
    names = []
    for value in node.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        if value.HasField("list"):
            names.extend(func.name for func in value.list.func)
    return [name for name in names if name]


def _check_variable_contents(path: Path, proto: saved_model_pb2.SavedModel) -> None:
    variables = path / "variables"
    if not (variables / "variables.index").is_file():
        return  # a graph without variables (check_variables has judged the rest)
    from tensorflow.python.training import py_checkpoint_reader

    try:
        reader = py_checkpoint_reader.NewCheckpointReader(str(variables / "variables"))
    except Exception as error:  # noqa: BLE001 - TensorFlow raises several types for one bad file
        raise SavedModelError(
            path, f"variables/variables.index is corrupt or truncated (TensorFlow: {first_line(error, path)})"
        ) from None
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    for key in sorted(shapes):
        try:
            reader.get_tensor(key)  # reads the bytes and checks their checksum
        except Exception as error:  # noqa: BLE001
            raise SavedModelError(
                path,
                f"{_data_files(variables)} is corrupt or truncated: its entry '{key}' does not read "
                f"back (TensorFlow: {first_line(error, path)})",
            ) from None
    for key, name, shape, dtype in _expected_variables(reader, proto):
        if key not in shapes:
            raise SavedModelError(path, f"variables/variables.index has no value for variable '{name}' ({key})")
        if list(shapes[key]) != shape or dtypes[key].as_datatype_enum != dtype.as_datatype_enum:
            raise SavedModelError(
                path,
                f"variables/variables.index gives variable '{name}' {dtypes[key].name}{list(shapes[key])}, "
                f"but saved_model.pb declares it {dtype.name}{shape}",
            )


def _expected_variables(reader, proto: saved_model_pb2.SavedModel):
    """(checkpoint key, name, shape, dtype) of each variable of the saved object graph.

    The checkpoint's object graph numbers its objects as the SavedModel's
    object graph does (TensorFlow saves both from one list), so node i of one
    is node i of the other. TF1 SavedModels have no object graph: nothing here.
    """
    import tensorflow as tf

    if not reader.has_tensor(_OBJECT_GRAPH_KEY):
        return
    checkpoint_graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
    for meta_graph in proto.meta_graphs:
        nodes = meta_graph.object_graph_def.nodes
        if len(nodes) != len(checkpoint_graph.nodes):
            continue  # not numbered alike: nothing can be matched safely
        for saved, checkpointed in zip(nodes, checkpoint_graph.nodes):
            if saved.WhichOneof("kind") != "variable" or saved.variable.shape.unknown_rank:
                continue
            for attribute in checkpointed.attributes:
                if attribute.name == "VARIABLE_VALUE":
                    shape = [dim.size for dim in saved.variable.shape.dim]
                    if all(size >= 0 for size in shape):
                        yield attribute.checkpoint_key, saved.variable.name, shape, tf.as_dtype(saved.variable.dtype)


def _data_files(variables: Path) -> str:
    shards = sorted(p.name for p in variables.glob("variables.data-*"))
    return f"variables/{shards[0]}" if len(shards) == 1 else f"variables/variables.data-* ({len(shards)} shards)"
