"""Which op types a SavedModel's serving signatures run, and are they stock.

`check_serving(path)` (`python -m grad_reverse check-serving PATH`) lists the
op types each serving signature runs and fails, naming them, if any is not a
stock TensorFlow op, as stock TF Serving would fail on it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf

from grad_reverse.serving import integrity
from grad_reverse.serving.constants import EXIT_ERROR, EXIT_FAILED, EXIT_OK, SERVING_TAG
from grad_reverse.serving.saved_model_dir import PathLike, SavedModelError, read_saved_model

# Registered by TensorFlow itself, but their kernels call back into the Python
# interpreter (tf.py_function, tf.numpy_function), which a server does not have.
NEEDS_PYTHON = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

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


@functools.cache
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


def meta_graph_for_tags(proto, tags: Sequence[str], path: PathLike):
    """The MetaGraphDef of `proto` whose tag set is exactly `tags`."""
    wanted = set(tags)
    for meta_graph in proto.meta_graphs:
        # The loader matches the tag set exactly, not a subset.
        if set(meta_graph.meta_info_def.tags) == wanted:
            return meta_graph
    available = [sorted(m.meta_info_def.tags) for m in proto.meta_graphs]
    raise SavedModelError(path, f"no MetaGraph tagged {sorted(wanted)}; it has {available}")


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

    Args:
      path: the SavedModel directory.
      tags: the MetaGraph's tags (default: `serve`).
    """
    return meta_graph_op_types(meta_graph_for_tags(read_saved_model(path), tags, path))


def meta_graph_op_types(meta_graph) -> dict[str, set[str]]:
    """signature_op_types for a MetaGraphDef proto."""
    collector = _OpCollector(meta_graph.graph_def)
    return {
        key: collector.ops_for_tensors([info.name for info in signature.outputs.values()])
        for key, signature in sorted(meta_graph.signature_def.items())
    }


def non_stock_op_types(path: PathLike, tags: Sequence[str] = (SERVING_TAG,)) -> dict[str, set[str]]:
    """The signatures of `path` that need ops stock TensorFlow does not have.

    Args:
      path: the SavedModel directory.
      tags: the MetaGraph's tags (default: `serve`).

    Returns:
      `{signature: the op types stock TensorFlow lacks}`, only for the signatures that need some.
    """
    stock = stock_op_types()
    found = {key: ops - stock for key, ops in signature_op_types(path, tags).items()}
    return {key: ops for key, ops in found.items() if ops}


def check_serving(path: PathLike, tags: Sequence[str] = (SERVING_TAG,), out=None) -> int:
    """Prints each signature's op types; returns EXIT_OK (0) if all are stock,
    EXIT_FAILED (1) if not, EXIT_ERROR (2) on error.

    Args:
      path: the SavedModel directory.
      tags: the MetaGraph's tags (default: `serve`).
      out: where the report is printed (default: stdout)."""
    out = out or sys.stdout
    try:
        proto = read_saved_model(path)
        integrity.check_whole(path, proto)
        per_signature = meta_graph_op_types(meta_graph_for_tags(proto, tags, path))
        stock = stock_op_types()
    except SavedModelError as error:  # names the path itself
        print(f"check-serving: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except (OSError, RuntimeError) as error:
        print(f"check-serving: error: {path}: {error}", file=sys.stderr)
        return EXIT_ERROR
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
        return EXIT_ERROR
    if not offenders:
        print("OK: every signature uses only stock TensorFlow ops; stock TF Serving can serve it.", file=out)
        return EXIT_OK
    names = sorted({op for ops in offenders.values() for op in ops})
    signatures = ", ".join(f"'{key}'" for key in offenders)
    plural = len(offenders) > 1
    print(
        f"check-serving: FAIL: signature{'s' if plural else ''} {signatures} "
        f"{'use' if plural else 'uses'} op types that stock TensorFlow "
        f"Serving does not register: {', '.join(names)}.",
        file=sys.stderr,
    )
    if {"GradReverse", "GradReverseGrad"} & set(names):
        print(
            f"check-serving: fix: python -m grad_reverse make-servable {path} DST (a copy with "
            "GradReverse replaced by Identity), or link the op into tensorflow_model_server",
            file=sys.stderr,
        )
    return EXIT_FAILED
