"""Corrupted SavedModels through check-serving, make-servable and make_servable.

Each case damages one file of a copy of a small Keras export, as a bad disk,
a cut-off copy or a careless edit would. Every tool must then exit 2 (a bad
SRC) with one line that names the SavedModel and says what is wrong, print
no Python traceback (TensorFlow's own logs included, as the tests capture
file descriptor 2), write nothing at DST and leave no hidden copy beside it.
The table in docs/serving.md lists the same cases.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.training import py_checkpoint_reader

from grad_reverse.serving import cli, make_servable
from grad_reverse.serving.saved_model_dir import SavedModelError, refresh_fingerprint

DEVICE = b"/device:CPU:0"  # a string Keras writes into the graph's nodes


def _replace(file: Path, transform) -> None:
    file.write_bytes(transform(file.read_bytes()))


def _flip_a_bit_in_a_device_name(data: bytes) -> bytes:
    """A flipped bit that still parses: '/device:' becomes '/devic%:'."""
    at = data.rfind(DEVICE)  # the last: early ones sit in functions no signature loads
    assert at >= 0, "the export holds no device string to damage"
    damaged = bytearray(data)
    damaged[at + 6] ^= 0x40
    return bytes(damaged)


def _flip_a_byte_in_the_middle(data: bytes) -> bytes:
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    return bytes(damaged)


def _drop_a_called_function(src: Path) -> None:
    """The signature's call target removed from the function library; the
    fingerprint recomputed, as a tool that edits graphs would."""
    pb = src / "saved_model.pb"
    proto = saved_model_pb2.SavedModel.FromString(pb.read_bytes())
    graph = proto.meta_graphs[0].graph_def
    called = {node.attr["f"].func.name for node in graph.node if node.op == "StatefulPartitionedCall"}
    kept = [f for f in graph.library.function if f.signature.name not in called]
    assert len(kept) < len(graph.library.function)
    del graph.library.function[:]
    graph.library.function.extend(kept)
    pb.write_bytes(proto.SerializeToString(deterministic=True))
    refresh_fingerprint(src)


def _reshape_a_variable(src: Path) -> None:
    """variables/ rewritten with one variable's value transposed: a readable
    checkpoint whose shapes do not match the graph."""
    prefix = str(src / "variables" / "variables")
    reader = py_checkpoint_reader.NewCheckpointReader(prefix)
    names = sorted(reader.get_variable_to_shape_map())
    tensors = [reader.get_tensor(name) for name in names]
    target = next(i for i, name in enumerate(names) if name.startswith("variables/") and tensors[i].ndim == 2)
    tensors[target] = np.ascontiguousarray(tensors[target].T)
    assert tensors[target].shape[0] != tensors[target].shape[1], "a square kernel would still match"
    for file in (src / "variables").iterdir():
        file.unlink()
    tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=[tf.constant(t) for t in tensors]
    )


def _data_file(src: Path) -> Path:
    [data] = (src / "variables").glob("variables.data-*")
    return data


# case: (damage, phrase the error line must hold)
CASES = {
    "pb_truncated": (
        lambda s: _replace(s / "saved_model.pb", lambda b: b[: len(b) // 2]),
        "saved_model.pb is corrupt or truncated",
    ),
    "pb_cut_to_10_bytes": (
        lambda s: _replace(s / "saved_model.pb", lambda b: b[:10]),
        "saved_model.pb is corrupt or truncated",
    ),
    "pb_empty": (lambda s: _replace(s / "saved_model.pb", lambda b: b""), "saved_model.pb is corrupt or truncated"),
    "pb_random_bytes": (
        lambda s: _replace(s / "saved_model.pb", lambda b: np.random.default_rng(0).bytes(len(b))),
        "saved_model.pb is corrupt or truncated",
    ),
    "pb_byte_flipped": (lambda s: _replace(s / "saved_model.pb", _flip_a_byte_in_the_middle), "saved_model.pb "),
    "pb_bit_flipped_still_parses": (
        lambda s: _replace(s / "saved_model.pb", _flip_a_bit_in_a_device_name),
        "saved_model.pb does not match the checksum fingerprint.pb holds",
    ),
    "pb_is_a_directory": (
        lambda s: ((s / "saved_model.pb").unlink(), (s / "saved_model.pb").mkdir()),
        "saved_model.pb is not a regular file",
    ),
    "variables_folder_missing": (lambda s: shutil.rmtree(s / "variables"), "has no variables folder"),
    "variables_index_missing": (
        lambda s: (s / "variables" / "variables.index").unlink(),
        "has no variables/variables.index",
    ),
    "variables_index_truncated": (
        lambda s: _replace(s / "variables" / "variables.index", lambda b: b[: len(b) // 2]),
        "variables/variables.index is corrupt or truncated",
    ),
    "variables_index_random_bytes": (
        lambda s: _replace(s / "variables" / "variables.index", lambda b: np.random.default_rng(1).bytes(len(b))),
        "variables/variables.index is corrupt or truncated",
    ),
    "variables_data_byte_flipped": (
        lambda s: _replace(_data_file(s), _flip_a_byte_in_the_middle),
        "variables/variables.data-00000-of-00001 is corrupt or truncated",
    ),
    "variables_data_truncated": (
        lambda s: _replace(_data_file(s), lambda b: b[: len(b) // 2]),
        "variables/variables.data-00000-of-00001 is corrupt or truncated",
    ),
    "variables_data_missing": (lambda s: _data_file(s).unlink(), "missing some of its variables.data-* shards"),
    "variables_shapes_differ_from_graph": (_reshape_a_variable, "but saved_model.pb declares it float32"),
    "fingerprint_garbage": (
        lambda s: _replace(s / "fingerprint.pb", lambda b: b"\xff" * 40),
        "fingerprint.pb is corrupt",
    ),
    "fingerprint_truncated": (
        lambda s: _replace(s / "fingerprint.pb", lambda b: b[: len(b) // 2]),
        "fingerprint.pb is corrupt",
    ),
    "fingerprint_is_a_directory": (
        lambda s: ((s / "fingerprint.pb").unlink(), (s / "fingerprint.pb").mkdir()),
        "fingerprint.pb is corrupt",
    ),
    "function_missing_from_library": (_drop_a_called_function, "which is not in the graph's function library"),
}


@pytest.fixture(params=sorted(CASES))
def corrupt(request, tmp_path, small_export):
    """(SRC damaged as the case says, the phrase its error must hold)."""
    damage, phrase = CASES[request.param]
    src = tmp_path / "src"
    shutil.copytree(small_export, src)
    damage(src)
    return src, phrase


def assert_one_error_line(err: str, command: str, src: Path, phrase: str) -> None:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{command}: error: {src}: "), lines[0]
    assert phrase in lines[0] and lines[0].count(str(src)) == 1, lines[0]


def assert_nothing_written(tmp_path: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # no DST, no hidden copy


def test_check_serving_exits_2_with_one_line(capfd, tmp_path, corrupt):
    src, phrase = corrupt
    code = cli.main(["check-serving", str(src)])
    out, err = capfd.readouterr()
    assert code == 2, out + err
    assert_one_error_line(err, "check-serving", src, phrase)


@pytest.mark.parametrize("verify", [True, False], ids=["verify", "no_verify"])
def test_make_servable_exits_2_with_one_line_and_writes_nothing(capfd, tmp_path, corrupt, verify):
    src, phrase = corrupt
    code = cli.main(["make-servable", str(src), str(tmp_path / "dst"), *([] if verify else ["--no-verify"])])
    out, err = capfd.readouterr()
    assert code == 2, out + err
    assert_one_error_line(err, "make-servable", src, phrase)
    assert_nothing_written(tmp_path)


def test_make_servable_in_python_raises_saved_model_error(capfd, tmp_path, corrupt):
    src, phrase = corrupt
    with pytest.raises(SavedModelError, match=None) as raised:
        make_servable(src, tmp_path / "dst")
    assert phrase in str(raised.value) and raised.value.path == str(src)
    assert "Traceback" not in capfd.readouterr().err
    assert_nothing_written(tmp_path)


def _device_bit_flipped_without_fingerprint(src: Path) -> None:
    """Without fingerprint.pb nothing records what saved_model.pb held: only loading it finds the damage."""
    _replace(src / "saved_model.pb", _flip_a_bit_in_a_device_name)
    (src / "fingerprint.pb").unlink()


def test_damage_only_loading_finds_is_a_bad_src_when_verifying(capfd, tmp_path, small_export):
    src = tmp_path / "src"
    shutil.copytree(small_export, src)
    _device_bit_flipped_without_fingerprint(src)
    code = cli.main(["make-servable", str(src), str(tmp_path / "dst")])
    out, err = capfd.readouterr()
    assert code == 2, out + err
    assert_one_error_line(err, "make-servable", src, "does not load with TensorFlow (")
    assert_nothing_written(tmp_path)


def test_the_real_command_prints_no_tensorflow_traceback_for_a_garbage_fingerprint(tmp_path, small_export):
    """The case that printed TensorFlow's traceback before: a whole process, its stderr as a user sees it."""
    src = tmp_path / "src"
    shutil.copytree(small_export, src)
    _replace(src / "fingerprint.pb", lambda b: b"\xff" * 40)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")  # every TensorFlow log line that would appear
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "make-servable", str(src), str(tmp_path / "dst")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "Fingerprint Error" not in result.stderr, result.stderr
    assert f"make-servable: error: {src}: fingerprint.pb is corrupt" in result.stderr
    assert_nothing_written(tmp_path)
