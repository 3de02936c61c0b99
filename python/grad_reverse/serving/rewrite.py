"""Replacing GradReverse and GradReverseGrad nodes with stock ops in a SavedModel proto.

Forward, `GradReverse(x, lambda)` is the identity, so it becomes
`Identity(x)`. Its `lambda` input is dropped, not kept as a control input:
the forward value never depends on it, and inside a function `lambda` is
often a function argument, which a control input cannot name. (The op's
check that `lambda` is a finite scalar goes with it: a serving graph has no
gradient for a bad `lambda` to poison.)

`GradReverseGrad(dy, lambda)` (a graph that computes a gradient) becomes
`dy * Neg(lambda)` with the kernel's rounding: float multiplies in float;
double casts `-lambda` to double first; half and bfloat16 are cast to float,
multiplied, and rounded back once (Cast rounds to nearest even, like the
kernel). Negating is exact, so `dy * (-lambda)` equals the kernel's result
bit for bit for every value but NaN: a NaN stays a NaN, but its payload may
differ (the kernel keeps a bfloat16 NaN's upper bits, TensorFlow's Cast may
return the canonical quiet NaN).

Each replaced node keeps its name, so references to it stay valid: in the
top-level graph they are "node" or "node:0" (output indices are unchanged);
in a function body they name the output argument, "node:y:0", and those are
rewritten to the new op's output argument ("node:output:0" for Identity).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from tensorflow.core.framework import node_def_pb2, types_pb2
from tensorflow.core.protobuf import saved_model_pb2

FORWARD, BACKWARD = "GradReverse", "GradReverseGrad"
REPLACED_OP_TYPES = (FORWARD, BACKWARD)
TOP_LEVEL = "(top-level graph)"
_HALF_TYPES = (types_pb2.DT_HALF, types_pb2.DT_BFLOAT16)
_OUTPUT_ARG = {FORWARD: "y", BACKWARD: "dx"}  # names in the op registrations (cc/ops)


@dataclass
class MetaGraphChanges:
    """What was replaced in one MetaGraph: per place (function name or TOP_LEVEL), op type counts."""

    tags: list[str]
    places: dict[str, Counter] = field(default_factory=dict)

    def total(self, op_type: str | None = None) -> int:
        return sum(c[op_type] if op_type else sum(c.values()) for c in self.places.values())


def rewrite_saved_model(proto: saved_model_pb2.SavedModel) -> list[MetaGraphChanges]:
    """Rewrites every MetaGraph of `proto` in place; returns what changed in each."""
    return [rewrite_meta_graph(meta_graph) for meta_graph in proto.meta_graphs]


def rewrite_meta_graph(meta_graph) -> MetaGraphChanges:
    """Replaces the nodes in the top-level graph and in every library function."""
    changes = MetaGraphChanges(tags=sorted(meta_graph.meta_info_def.tags))
    graph_def = meta_graph.graph_def
    counts = _rewrite_nodes(graph_def.node, in_function=False)
    if counts:
        changes.places[TOP_LEVEL] = counts
    for function in graph_def.library.function:
        counts = _rewrite_function(function)
        if counts:
            changes.places[function.signature.name] = counts
    if changes.places:
        used = {node.op for node in graph_def.node}
        used.update(node.op for function in graph_def.library.function for node in function.node_def)
        _update_stripped_op_list(meta_graph.meta_info_def.stripped_op_list, used)
    return changes


def _rewrite_function(function) -> Counter:
    # Old output reference prefix ("node:y:") -> new one ("node:output:").
    renamed: dict[str, str] = {}
    counts = _rewrite_nodes(function.node_def, in_function=True, renamed_outputs=renamed)
    if renamed:
        for node in function.node_def:
            _rename_inputs(node.input, renamed)
        for key, value in list(function.ret.items()):
            function.ret[key] = _renamed(value, renamed)
    return counts


def _rewrite_nodes(nodes, *, in_function: bool, renamed_outputs: dict | None = None) -> Counter:
    counts: Counter = Counter()
    names = {node.name for node in nodes}
    added: list[node_def_pb2.NodeDef] = []
    for node in nodes:
        if node.op not in REPLACED_OP_TYPES:
            continue
        op_type = node.op
        data = [i for i in node.input if not i.startswith("^")]
        controls = [i for i in node.input if i.startswith("^")]
        if len(data) != 2:
            raise ValueError(f"{op_type} node '{node.name}' has {len(data)} data inputs, expected 2")
        value, lambda_ = data
        if op_type == FORWARD:
            new_output = _to_identity(node, value, controls)
        else:
            new_output, extra = _to_neg_scale(node, value, lambda_, controls, names, in_function)
            added.extend(extra)
        if renamed_outputs is not None:
            renamed_outputs[f"{node.name}:{_OUTPUT_ARG[op_type]}:"] = f"{node.name}:{new_output}:"
        counts[op_type] += 1
    nodes.extend(added)
    return counts


def _to_identity(node, value: str, controls: list[str]) -> str:
    _replace(node, "Identity", [value, *controls], {"T": node.attr["T"]})
    return "output"


def _to_neg_scale(node, dy: str, lambda_: str, controls, names: set, in_function: bool):
    """`node` becomes the last op of dy * -lambda; returns its output arg and the new nodes."""
    dtype = node.attr["T"].type
    float_attr = _type_attr(types_pb2.DT_FLOAT)
    extra: list[node_def_pb2.NodeDef] = []

    def add(suffix: str, op: str, inputs: Iterable[str], attrs: dict, output_arg: str) -> str:
        new = node_def_pb2.NodeDef(name=_unique(f"{node.name}/servable_{suffix}", names), op=op)
        new.input.extend(inputs)
        new.device = node.device
        for key, attr in attrs.items():
            new.attr[key].CopyFrom(attr)
        extra.append(new)
        return f"{new.name}:{output_arg}:0" if in_function else new.name

    scale = add("neg_lambda", "Neg", [lambda_], {"T": float_attr}, "y")
    if dtype == types_pb2.DT_FLOAT:
        _replace(node, "Mul", [dy, scale, *controls], {"T": float_attr})
        return "z", extra
    if dtype == types_pb2.DT_DOUBLE:
        scale = add("cast_lambda", "Cast", [scale], _cast_attrs(types_pb2.DT_FLOAT, dtype), "y")
        _replace(node, "Mul", [dy, scale, *controls], {"T": _type_attr(dtype)})
        return "z", extra
    if dtype in _HALF_TYPES:
        wide = add("cast_dy", "Cast", [dy], _cast_attrs(dtype, types_pb2.DT_FLOAT), "y")
        product = add("mul", "Mul", [wide, scale], {"T": float_attr}, "z")
        _replace(node, "Cast", [product, *controls], _cast_attrs(types_pb2.DT_FLOAT, dtype))
        return "y", extra
    raise ValueError(f"{BACKWARD} node '{node.name}' has unsupported type {types_pb2.DataType.Name(dtype)}")


def _replace(node, op: str, inputs: list[str], attrs: dict) -> None:
    """Turns `node` into `op`, keeping its name, device and debug info.

    Attributes whose names start with "_" (shapes, colocation, XLA hints)
    describe the node, not the op, and are kept; the op's own are replaced.
    """
    kept = {key: value for key, value in node.attr.items() if key.startswith("_")}
    kept.update(attrs)
    copies = {key: type(value)() for key, value in kept.items()}
    for key, value in kept.items():
        copies[key].CopyFrom(value)
    node.op = op
    del node.input[:]
    node.input.extend(inputs)
    node.attr.clear()
    for key, value in copies.items():
        node.attr[key].CopyFrom(value)


def _type_attr(dtype: int):
    from tensorflow.core.framework import attr_value_pb2

    return attr_value_pb2.AttrValue(type=dtype)


def _cast_attrs(source: int, destination: int) -> dict:
    from tensorflow.core.framework import attr_value_pb2

    return {
        "SrcT": _type_attr(source),
        "DstT": _type_attr(destination),
        "Truncate": attr_value_pb2.AttrValue(b=False),  # round to nearest even, as the kernel
    }


def _unique(name: str, names: set) -> str:
    candidate, index = name, 1
    while candidate in names:
        candidate, index = f"{name}_{index}", index + 1
    names.add(candidate)
    return candidate


def _renamed(reference: str, renamed: dict) -> str:
    for old, new in renamed.items():
        if reference.startswith(old) and reference[len(old) :].isdigit():
            return new + reference[len(old) :]
    return reference


def _rename_inputs(inputs, renamed: dict) -> None:
    for index, reference in enumerate(inputs):
        new = _renamed(reference, renamed)
        if new != reference:
            inputs[index] = new


def _update_stripped_op_list(op_list, used: set) -> None:
    """Keeps the MetaGraph's record of the op types it uses accurate."""
    from tensorflow.python.framework import op_def_registry  # private; see tests

    kept = [op for op in op_list.op if op.name not in REPLACED_OP_TYPES]
    present = {op.name for op in kept}
    del op_list.op[:]
    op_list.op.extend(kept)
    for name in ("Identity", "Neg", "Mul", "Cast"):
        op_def = op_def_registry.get(name)
        if name in used and name not in present and op_def is not None:
            op_list.op.add().CopyFrom(op_def)
    ordered = sorted(op_list.op, key=lambda op: op.name)
    del op_list.op[:]
    op_list.op.extend(ordered)
