"""Exporting models for TensorFlow Serving, and checking what an export needs.

Stock TF Serving (`tensorflow_model_server`) cannot load op libraries, so a
serving signature that contains `GradReverse` fails there with "Op type not
registered 'GradReverse'". Forward, the op is the identity, so inference
graphs do not need it:

* `check_serving(path)` (`python -m grad_reverse check-serving PATH`) lists
  the op types each serving signature runs and fails, naming them, if any is
  not a stock TensorFlow op.
* `export_serving(model, path)` exports a Keras model with `training=False`,
  so `GradReverse` layers (and Dropout, BatchNorm) run in inference mode and
  leave the op out. Keras' own `model.export(path)` calls the model with
  `training` unset, and the layer then keeps the op (a custom training loop
  calling `model(x)` must still reverse gradients).
* `grad_reverse_or_identity(x, lambda_, training=...)` is the layer's rule for
  code that calls the function directly: trace the serving function with
  `training=False` and the op is left out.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import tensorflow as tf
from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import saved_model_pb2

from grad_reverse.ops import LambdaLike, grad_reverse

SERVING_TAG = "serve"  # the tag set tensorflow_model_server loads by default
# Registered by TensorFlow itself, but their kernels call back into the Python
# interpreter (tf.py_function, tf.numpy_function), which a server does not have.
NEEDS_PYTHON = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
PathLike = Union[str, os.PathLike]

# Listed by a separate interpreter that loads TensorFlow's two C++ libraries
# and nothing else. "Stock" means: registered by this TensorFlow's C++ runtime
# on its own, which is what tensorflow_model_server links. Asking the current
# process instead would count GradReverse, and any other op library the user
# has loaded, as stock; subtracting a list of our op names would still count
# those other libraries. The child does not `import tensorflow`: that is ten
# times slower, and it would add ops that only TensorFlow's Python extension
# modules register (test ops, for one), which no server has.
# TF_GetAllOpList is the C API's dump of the op registry (an OpList proto).
_LIST_STOCK_OPS = """
import ctypes, os, sys
lib_dir, out_path = sys.argv[1:3]
ctypes.CDLL(os.path.join(lib_dir, "libtensorflow_framework.so.2"), mode=ctypes.RTLD_GLOBAL)
cc = ctypes.CDLL(os.path.join(lib_dir, "libtensorflow_cc.so.2"), mode=ctypes.RTLD_GLOBAL)
class Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t),
                ("deallocator", ctypes.c_void_p)]
cc.TF_GetAllOpList.restype = ctypes.POINTER(Buffer)
buffer = cc.TF_GetAllOpList().contents
with open(out_path, "wb") as out:
    out.write(ctypes.string_at(buffer.data, buffer.length))
"""


@functools.lru_cache(maxsize=None)
def _stock_registry() -> frozenset[str]:
    from tensorflow.core.framework import op_def_pb2

    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(tmp) / "ops.pb"
        result = subprocess.run(
            [sys.executable, "-c", _LIST_STOCK_OPS, tf.sysconfig.get_lib(), str(out_path)],
            capture_output=True,
            text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        )
        if result.returncode != 0 or not out_path.is_file():
            raise RuntimeError(
                "grad_reverse: could not list the stock TensorFlow ops by loading the "
                f"libraries in {tf.sysconfig.get_lib()} (exit {result.returncode}):\n"
                f"{result.stderr[-2000:]}"
            )
        ops = frozenset(op.name for op in op_def_pb2.OpList.FromString(out_path.read_bytes()).op)
    # Guards the premise: if something had loaded our library into that
    # process, the check would accept GradReverse.
    if "GradReverse" in ops or "MatMul" not in ops:
        raise RuntimeError(
            "grad_reverse: TensorFlow's C++ libraries loaded alone do not give the expected "
            "op registry (GradReverse present or MatMul missing); cannot tell stock ops "
            "from custom ones"
        )
    return ops


def stock_op_types() -> frozenset[str]:
    """Op types registered by this TensorFlow alone (no op libraries loaded).

    A stock `tensorflow_model_server` of the same version registers the same
    core ops (it links TensorFlow's kernels, and a few extra op sets such as
    TF Text's). The py_function ops (NEEDS_PYTHON) are left out: no server
    can run them. Computed once per process, in a subprocess (about a second).
    """
    return _stock_registry() - NEEDS_PYTHON


def read_saved_model(path: PathLike) -> saved_model_pb2.SavedModel:
    """The SavedModel proto of the export directory `path`."""
    directory = Path(path)
    binary, text = directory / "saved_model.pb", directory / "saved_model.pbtxt"
    proto = saved_model_pb2.SavedModel()
    if binary.is_file():
        proto.ParseFromString(binary.read_bytes())
    elif text.is_file():
        from google.protobuf import text_format

        text_format.Parse(text.read_text(), proto)
    else:
        raise FileNotFoundError(
            f"{directory} is not a SavedModel directory: it has no saved_model.pb"
        )
    return proto


def _meta_graph(proto: saved_model_pb2.SavedModel, tags: Sequence[str]):
    wanted = set(tags)
    for meta_graph in proto.meta_graphs:
        # The loader matches the tag set exactly, not a subset.
        if set(meta_graph.meta_info_def.tags) == wanted:
            return meta_graph
    available = [sorted(m.meta_info_def.tags) for m in proto.meta_graphs]
    raise ValueError(f"the SavedModel has no MetaGraph tagged {sorted(wanted)}; it has {available}")


class _OpCollector:
    """Op types a set of graph tensors depends on, through called functions."""

    def __init__(self, graph_def) -> None:
        self._nodes = {node.name: node for node in graph_def.node}
        self._functions = {f.signature.name: f for f in graph_def.library.function}

    def ops_for_tensors(self, tensor_names: Sequence[str]) -> set[str]:
        ops: set[str] = set()
        visited_functions: set[str] = set()
        seen: set[str] = set()
        # Graph-level edges are "node", "node:index" or "^node" (control).
        pending = [name.lstrip("^").split(":")[0] for name in tensor_names]
        while pending:
            name = pending.pop()
            if name in seen or name not in self._nodes:
                continue
            seen.add(name)
            node = self._nodes[name]
            self._add_node(node, ops, visited_functions)
            pending.extend(i.lstrip("^").split(":")[0] for i in node.input)
        return ops

    def _add_node(self, node, ops: set[str], visited: set[str]) -> None:
        # A node whose op type names a library function is a direct call.
        if node.op in self._functions:
            self._add_function(node.op, ops, visited)
        else:
            ops.add(node.op)
        # Calls through PartitionedCall/StatefulPartitionedCall (`f`), If and
        # While branches, map functions of tf.data, ...: any function attr.
        for value in node.attr.values():
            if value.HasField("func"):
                self._add_function(value.func.name, ops, visited)
            if value.HasField("list"):
                for func in value.list.func:
                    self._add_function(func.name, ops, visited)

    def _add_function(self, name: str, ops: set[str], visited: set[str]) -> None:
        if name in visited or name not in self._functions:
            return
        visited.add(name)
        # Every node counts: instantiating a function needs all its op types
        # registered, even the ones pruned before it runs.
        for node in self._functions[name].node_def:
            self._add_node(node, ops, visited)


def signature_op_types(path: PathLike, tags: Sequence[str] = (SERVING_TAG,)) -> dict[str, set[str]]:
    """For each signature of the SavedModel at `path`, the op types it runs.

    Follows the signature's outputs back through the graph and into every
    function it calls, recursively. `__saved_model_init_op` (run when a server
    loads the model) is included like a signature. Functions no signature
    reaches (a saved `train_step`, say) are not: a server never instantiates
    them, so they may keep GradReverse.
    """
    meta_graph = _meta_graph(read_saved_model(path), tags)
    collector = _OpCollector(meta_graph.graph_def)
    return {
        key: collector.ops_for_tensors([info.name for info in signature.outputs.values()])
        for key, signature in sorted(meta_graph.signature_def.items())
    }


def non_stock_op_types(path: PathLike, tags: Sequence[str] = (SERVING_TAG,)) -> dict[str, set[str]]:
    """The signatures of `path` that need ops stock TensorFlow does not have."""
    stock = stock_op_types()
    found = {key: ops - stock for key, ops in signature_op_types(path, tags).items()}
    return {key: ops for key, ops in found.items() if ops}


def check_serving(path: PathLike, tags: Sequence[str] = (SERVING_TAG,), out=None) -> int:
    """Prints each signature's op types; returns 0 if all are stock, 1 if not, 2 on error."""
    out = out or sys.stdout
    try:
        per_signature = signature_op_types(path, tags)
        stock = stock_op_types()
    except (OSError, ValueError, RuntimeError, DecodeError) as error:
        print(f"check-serving: error: {path}: {error}", file=sys.stderr)
        return 2
    print(f"SavedModel {path}, tag set {sorted(tags)}, against TensorFlow {tf.__version__}'s ops", file=out)
    offenders: dict[str, list[str]] = {}
    for key, ops in per_signature.items():
        print(f"signature '{key}': {', '.join(sorted(ops)) or '(no ops)'}", file=out)
        custom = sorted(ops - stock)
        if custom:
            offenders[key] = custom
            print(f"  not stock TensorFlow: {', '.join(custom)}", file=out)
    if not per_signature:
        print(f"check-serving: error: {path} has no signatures to serve", file=sys.stderr)
        return 2
    if not offenders:
        print("OK: every signature uses only stock TensorFlow ops; stock TF Serving can serve it.", file=out)
        return 0
    names = sorted({op for ops in offenders.values() for op in ops})
    signatures = ", ".join(f"'{key}'" for key in offenders)
    hint = ""
    if {"GradReverse", "GradReverseGrad"} & set(names):
        hint = (
            " Export inference graphs with training=False (grad_reverse.serving.export_serving for"
            " Keras models, grad_reverse_or_identity for direct calls), or serve with a"
            " tensorflow_model_server built with the op linked in."
        )
    plural = len(offenders) > 1
    print(
        f"check-serving: FAIL: signature{'s' if plural else ''} {signatures} "
        f"{'use' if plural else 'uses'} op types that stock TensorFlow "
        f"Serving does not register: {', '.join(names)}.{hint}",
        file=sys.stderr,
    )
    return 1


def grad_reverse_or_identity(
    x, lambda_: LambdaLike = 1.0, *, training: Optional[bool] = None, name: Optional[str] = None
):
    """The `GradReverse` layer's rule, for code that calls the op directly.

    Returns `x` itself when `training` is False (no op in the graph, so a
    serving function traced that way needs only stock TensorFlow ops);
    otherwise `grad_reverse(x, lambda_)`: identity forward, gradient
    `-lambda_ * dy`. Like the layer, `training=None` reverses gradients, so a
    training step that forgets to pass `training=True` still trains
    adversarially.

    Typical use: give the model's call a `training` argument, pass it here,
    and export a serving function that calls the model with `training=False`.
    """
    if training is False:
        return x
    return grad_reverse(x, lambda_, name=name)


def _default_input_signature(model: Any) -> list:
    inputs = getattr(model, "inputs", None)
    if not inputs:
        raise ValueError(
            "export_serving: the model has no known inputs (a subclassed model that was "
            "never called?); pass input_signature=[tf.TensorSpec(...)]"
        )
    specs = [tf.TensorSpec(t.shape, t.dtype, name=t.name) for t in inputs]
    # One positional argument, structured like the model's inputs.
    return [specs[0] if len(specs) == 1 else specs]


def export_serving(
    model: Any,
    path: PathLike,
    *,
    input_signature: Optional[list] = None,
    check: bool = True,
    verbose: bool = False,
) -> None:
    """Exports a Keras model for TF Serving with `training=False`.

    Like `model.export(path)` (a `serving_default` signature, the same input
    names), except that the model is called with `training=False`, so
    `GradReverse` layers leave the op out and Dropout/BatchNorm run in
    inference mode. With `check` (the default) it then verifies, like
    `check-serving`, that every signature uses only stock TensorFlow ops, and
    raises ValueError naming the others (a direct `grad_reverse` call that
    ignores `training`, say; see `grad_reverse_or_identity`).
    """
    import keras

    signature = input_signature if input_signature is not None else _default_input_signature(model)
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", lambda inputs: model(inputs, training=False), signature)
    archive.write_out(str(path), verbose=verbose)
    if check:
        found = non_stock_op_types(path)
        if found:
            details = "; ".join(f"'{key}': {', '.join(sorted(ops))}" for key, ops in found.items())
            raise ValueError(
                f"export_serving: {path} still needs op types stock TF Serving lacks ({details}). "
                "A call to grad_reverse() that does not depend on `training` puts the op in "
                "every graph; use grad_reverse_or_identity(x, lambda_, training=training)."
            )


def _run_check_serving(args: argparse.Namespace) -> int:
    return check_serving(args.path, tags=args.tags.split(","))


def add_cli(subparsers: Any) -> None:
    """Registers `check-serving PATH` on the CLI's subparsers (see __main__.py)."""
    parser = subparsers.add_parser(
        "check-serving",
        help="list the op types of a SavedModel's serving signatures; fail on non-stock ones",
        description=(
            "Lists the op types each signature of the SavedModel runs (following called "
            "functions) and exits 1, naming them, if any is not registered by TensorFlow "
            "alone, as stock TensorFlow Serving would reject it. Exit 0 when all are stock, "
            "2 on errors (not a SavedModel, no such tag set)."
        ),
    )
    parser.add_argument("path", metavar="PATH", help="SavedModel directory")
    parser.add_argument(
        "--tags",
        default=SERVING_TAG,
        help=f"comma-separated tag set of the MetaGraph to check (default: {SERVING_TAG})",
    )
    parser.set_defaults(run=_run_check_serving)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m grad_reverse.serving PATH`: check-serving without the package CLI."""
    parser = argparse.ArgumentParser(prog="python -m grad_reverse.serving")
    add_cli(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
