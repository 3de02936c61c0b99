"""Runs a SavedModel's signatures on given inputs; imports only TensorFlow and numpy.

`verify` uses it twice on the same inputs: in its own process for SRC (where
the op library is loaded) and, for DST, as the source text of a fresh
`python -c` child that never imports `grad_reverse`, so it has neither the op
nor its library. That is why this file imports nothing from the package.

Tensors travel between the processes as serialized TensorProtos (any dtype,
bfloat16 included), base64 in JSON.
"""

import base64
import json
import sys

import tensorflow as tf


def encode(tensors: dict) -> dict:
    return {
        key: base64.b64encode(tf.make_tensor_proto(value).SerializeToString()).decode()
        for key, value in tensors.items()
    }


def decode(encoded: dict) -> dict:
    result = {}
    for key, text in encoded.items():
        proto = tf.make_tensor_proto(0)
        proto.ParseFromString(base64.b64decode(text))
        result[key] = tf.make_ndarray(proto)
    return result


def run_signatures(path: str, tags: list, inputs: dict) -> dict:
    """{signature: {"outputs": {key: ndarray}} or {"error": text}} for each signature in `inputs`."""
    loaded = tf.saved_model.load(path, tags=tags)
    results = {}
    for key, arguments in inputs.items():
        try:
            outputs = loaded.signatures[key](**{name: tf.constant(value) for name, value in arguments.items()})
            results[key] = {"outputs": {name: value.numpy() for name, value in outputs.items()}}
        except Exception as error:  # reported to the parent, which decides
            first_line = (str(error).strip().splitlines() or [""])[0]  # some errors have no message
            results[key] = {"error": f"{type(error).__name__}: {first_line}"}
    return results


def op_library_loaded() -> bool:
    """Whether GradReverse is registered in this process (the proof needs it not to be)."""
    if any(name == "grad_reverse" or name.startswith("grad_reverse.") for name in sys.modules):
        return True
    try:
        from tensorflow.python.framework import op_def_registry
    except ImportError:  # moved in some TensorFlow: the sys.modules test above stands
        return False
    return op_def_registry.get("GradReverse") is not None


def main(argv: list) -> int:
    """argv: PATH TAGS(comma-separated) INPUTS_JSON OUTPUTS_JSON."""
    path, tags, inputs_file, outputs_file = argv
    with open(inputs_file) as f:
        inputs = {key: decode(value) for key, value in json.load(f).items()}
    results = run_signatures(path, tags.split(","), inputs)
    if op_library_loaded():
        print("signature_runner: GradReverse is registered in this process; the run proves nothing", file=sys.stderr)
        return 3
    encoded = {
        key: {"outputs": encode(result["outputs"])} if "outputs" in result else result
        for key, result in results.items()
    }
    with open(outputs_file, "w") as f:
        json.dump(encoded, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
