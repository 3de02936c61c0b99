"""`python -m grad_reverse demo --problem fashion-mnist-m`: the IDX reader and
where it looks, the photograph blending, the errors for missing data or
scikit-learn, and a tiny run of the whole path on IDX files written here (a
few hundred synthetic images: CI has no Fashion-MNIST), with stand-in
photographs (CI has no scikit-learn)."""

import argparse
import gzip
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import grad_reverse
from grad_reverse import __main__ as package_cli
from grad_reverse.demo import cli, fashion_mnist, image_runs, method_runs, photo_patches

NAMES = fashion_mnist.FILES
PACKAGE_PARENT = str(Path(grad_reverse.__file__).resolve().parents[1])  # this grad_reverse, from any cwd


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX written from its description (two zero bytes, type 0x08, rank, big-endian sizes), not by the reader."""
    return bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.astype("u1").tobytes()


def write_fashion(directory, n_train=300, n_test=100, gz=True, seed=0):
    """Four IDX files of images whose class is a bright bar's row, and each image's
    index in two pixels (so that the halves can be told apart). Returns the arrays."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", n_train), ("test", n_test)):
        labels = rng.integers(10, size=n).astype("u1")
        images = rng.integers(0, 40, size=(n, 28, 28)).astype("u1")
        for i, label in enumerate(labels):
            images[i, 4 + 2 * label : 6 + 2 * label, 4:24] = 230
            images[i, 27, 0], images[i, 27, 1] = i // 256, i % 256
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = images, labels
    os.makedirs(directory, exist_ok=True)
    for key, name in NAMES.items():
        data = idx_bytes(arrays[key])
        if gz:
            with gzip.open(os.path.join(directory, name + ".gz"), "wb") as f:
                f.write(data)
        else:
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
    return arrays


def stand_in_photos():
    """Two 'photographs' whose every pixel is different (rows and columns in two channels)."""
    rows, cols = np.meshgrid(np.arange(60), np.arange(70), indexing="ij")
    first = np.stack([rows / 60.0, cols / 70.0, np.full(rows.shape, 0.5)], axis=-1).astype("float32")
    return [first, first[::-1, ::-1].copy()]


# --- the IDX reader and where it looks ---------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
def test_read_idx_reads_images_and_labels_gzipped_or_not(tmp_path, gz):
    arrays = write_fashion(tmp_path, n_train=7, n_test=3, gz=gz)
    data = fashion_mnist.load(str(tmp_path))
    assert data.x_train.shape == (7, 28, 28) and data.x_test.shape == (3, 28, 28)
    np.testing.assert_array_equal(data.x_train, arrays["train_images"])
    np.testing.assert_array_equal(data.y_test, arrays["test_labels"])
    assert data.directory == str(tmp_path)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\x00\x00\x0d\x01\x00\x00\x00\x02ab", "not an IDX file of unsigned bytes"),  # float type
        (b"PK\x03\x04", "not an IDX file"),
        (b"\x00\x00\x08\x03\x00\x00", "cut short"),
        (idx_bytes(np.zeros((2, 3), "u1"))[:-1], "header says shape (2, 3)"),
        (idx_bytes(np.zeros((2, 3), "u1")) + b"x", "(18 bytes in all), the file has 19"),
    ],
)
def test_read_idx_refuses_what_is_not_an_idx_of_bytes_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad-idx1-ubyte"
    path.write_bytes(content)
    with pytest.raises(ValueError) as error:
        fashion_mnist.read_idx(str(path))
    assert message in str(error.value) and str(path) in str(error.value)


def test_load_refuses_labels_that_do_not_match_the_images(tmp_path):
    write_fashion(tmp_path, n_train=5, n_test=3, gz=False)
    (tmp_path / NAMES["test_labels"]).write_bytes(idx_bytes(np.zeros(4, "u1")))
    with pytest.raises(ValueError, match=r"test images must be \[n, rows, cols\] with one label each"):
        fashion_mnist.load(str(tmp_path))


def test_debian_path_first_then_keras_cache_and_only_data_when_given(tmp_path, monkeypatch):
    debian, keras_home, given = tmp_path / "debian", tmp_path / "keras", tmp_path / "given"
    monkeypatch.setattr(fashion_mnist, "DEBIAN_DIR", str(debian))
    monkeypatch.setenv("KERAS_HOME", str(keras_home))
    cache = keras_home / "datasets" / "fashion-mnist"
    write_fashion(cache, n_train=4, n_test=2)
    assert fashion_mnist.find() == str(cache)
    write_fashion(debian, n_train=4, n_test=2, gz=False)
    assert fashion_mnist.find() == str(debian)
    with pytest.raises(fashion_mnist.DataMissing, match="looked in: " + str(given)):
        fashion_mnist.find(str(given))  # given: that folder and no other
    (debian / NAMES["test_labels"]).unlink()  # three of four files are not the data set
    assert fashion_mnist.find() == str(cache)


# --- errors before TensorFlow ------------------------------------------------------


def preflight_args(*argv):
    parser = argparse.ArgumentParser(prog="demo-test")
    cli.add_cli(parser.add_subparsers(dest="command"))
    return parser.parse_args(["demo", *argv])


def test_missing_data_exits_2_with_how_to_get_it_and_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "demo", "--problem", "fashion-mnist-m", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # were the check to let the run start, its output folder would land here
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")])),
    )
    assert result.returncode == 2, result.stderr
    assert "apt install dataset-fashion-mnist" in result.stderr
    assert 'python -c "import keras; keras.datasets.fashion_mnist.load_data()"' in result.stderr
    assert "Traceback" not in result.stderr and "loading TensorFlow" not in result.stdout


def test_missing_data_in_the_default_places_names_both(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fashion_mnist, "DEBIAN_DIR", str(tmp_path / "debian"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(photo_patches, "check_photographs_available", lambda: None)
    assert cli.preflight(preflight_args("--problem", "fashion-mnist-m")) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "debian") in err and str(tmp_path / "keras" / "datasets" / "fashion-mnist") in err
    assert "apt install dataset-fashion-mnist" in err


def test_a_damaged_file_exits_2_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(photo_patches, "check_photographs_available", lambda: None)
    write_fashion(tmp_path, n_train=4, n_test=2, gz=False)
    (tmp_path / NAMES["train_images"]).write_bytes(b"\x00\x00\x08\x03\x00")
    assert cli.preflight(preflight_args("--problem", "fashion-mnist-m", "--data", str(tmp_path))) == 2
    assert NAMES["train_images"] in capsys.readouterr().err


def test_missing_scikit_learn_exits_2_saying_how_to_install_it(tmp_path, monkeypatch, capsys):
    write_fashion(tmp_path, n_train=4, n_test=2)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # find_spec answers None: not installed
    assert cli.preflight(preflight_args("--problem", "fashion-mnist-m", "--data", str(tmp_path))) == 2
    assert "pip install scikit-learn" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--problem", "blobs", "--data", "x"], "--data is for --problem fashion-mnist-m only"),
        (["--methods", "dann", "target_trained"], "target_trained trains on the target's labels"),
    ],
)
def test_image_only_options_on_another_problem_exit_2(argv, message, capsys):
    assert cli.preflight(preflight_args(*argv)) == 2
    assert message in capsys.readouterr().err


def test_the_image_problem_defaults_to_its_own_steps_and_methods_with_the_ceiling_only_there():
    args = preflight_args("--problem", "fashion-mnist-m")
    assert cli.default_steps(args) == image_runs.STEPS
    assert tuple(cli.default_methods(args)) == image_runs.IMAGE_METHODS
    assert cli.default_seeds(args) == (0, 1, 2)
    # The ceiling is the image problem's alone: a comparison on another problem runs without it.
    assert cli.IMAGE_ONLY_METHODS == ("target_trained",)
    assert cli.default_methods(preflight_args("--problem", "blobs")) == list(method_runs.METHODS)


# --- the target domain -------------------------------------------------------------


def test_blend_is_the_absolute_difference_with_one_window_of_a_photograph_per_image():
    photos = stand_in_photos()
    grey = np.random.default_rng(1).random((6, 28, 28)).astype("float32")
    out = photo_patches.blend_with_patches(grey, photos, np.random.default_rng(2))
    assert out.shape == (6, 28, 28, 3) and out.dtype == np.float32
    windows = [
        photo[top : top + 28, left : left + 28]
        for photo in photos
        for top in range(photo.shape[0] - 27)
        for left in range(photo.shape[1] - 27)
    ]
    for image, blended in zip(grey, out):
        # Every window of either photograph differs, so exactly one must give this image's blend.
        matches = [w for w in windows if np.allclose(np.abs(image[..., None] - w), blended, atol=1e-6)]
        assert len(matches) == 1


def test_blend_refuses_colour_input_and_photographs_too_small():
    with pytest.raises(ValueError, match=r"\[n, rows, cols\] or \[n, rows, cols, 1\]"):
        photo_patches.blend_with_patches(np.zeros((2, 28, 28, 3)), stand_in_photos(), np.random.default_rng(0))
    with pytest.raises(ValueError, match="no 28 x 28 window"):
        photo_patches.blend_with_patches(np.zeros((2, 28, 28)), [np.zeros((20, 40, 3))], np.random.default_rng(0))


def test_source_and_target_are_disjoint_halves_and_the_test_set_comes_in_both_versions(tmp_path):
    arrays = write_fashion(tmp_path, n_train=300, n_test=100)
    problem = image_runs.fashion_mnist_m(0, fashion_mnist.load(str(tmp_path)), stand_in_photos())
    assert len(problem.x_source) == len(problem.x_target) == 150 and len(problem.y_test) == 100
    assert sorted(np.concatenate([problem.source_index, problem.target_index]).tolist()) == list(range(300))
    np.testing.assert_array_equal(problem.y_source, arrays["train_labels"][problem.source_index])
    np.testing.assert_array_equal(problem.y_target, arrays["train_labels"][problem.target_index])
    np.testing.assert_array_equal(problem.y_test, arrays["test_labels"])

    def correlation(a, b):
        return np.corrcoef(np.ravel(a), np.ravel(b))[0, 1]

    # Each network input is its image standardised (an increasing affine map): correlation 1 with the file's
    # image, per channel, for the grey versions; the blended ones are not (their photograph patch differs).
    for i in (0, 77, 149):
        raw = arrays["train_images"][problem.source_index[i]]
        assert all(correlation(problem.x_source[i, ..., c], raw) > 0.9999 for c in range(3))
        assert correlation(problem.x_target[i, ..., 0], arrays["train_images"][problem.target_index[i]]) < 0.99
    for i in (0, 99):
        assert correlation(problem.x_test_source[i, ..., 1], arrays["test_images"][i]) > 0.9999
        assert correlation(problem.x_test_target[i, ..., 1], arrays["test_images"][i]) < 0.99
    for x in (problem.x_source, problem.x_target, problem.x_test_target):
        np.testing.assert_allclose(x.mean(axis=(1, 2)), 0.0, atol=1e-4)
    target_pixels = problem.x_target
    assert np.abs(target_pixels[..., 0] - target_pixels[..., 1]).max() > 0.1  # colour, not grey


def test_gap_closed_is_the_share_of_the_way_from_source_only_to_the_ceiling():
    result = {"accuracy": {"plain": [0.4, 0.4], "dann": [0.5, 0.6], "target_trained": [0.8, 0.8], "mdd": [0.3]}}
    closed = image_runs.gap_closed(result)
    assert closed == pytest.approx({"dann": 0.375, "mdd": -0.25})
    assert image_runs.gap_closed({"accuracy": {"plain": [0.4], "dann": [0.5]}}) == {}


# --- the whole path, tiny ------------------------------------------------------------


@pytest.mark.slow  # CI's step 2b, once: in-process, but six models traced and trained (about 20 s)
def test_a_tiny_run_trains_every_method_and_writes_the_table_pictures_and_export(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    write_fashion(data, n_train=300, n_test=100)
    monkeypatch.setattr(photo_patches, "check_photographs_available", lambda: None)
    monkeypatch.setattr(photo_patches, "photographs", stand_in_photos)
    read, read_idx = [], fashion_mnist.read_idx
    monkeypatch.setattr(fashion_mnist, "read_idx", lambda path: read.append(path) or read_idx(path))
    out = tmp_path / "out"
    argv = [
        "demo",
        "--problem",
        "fashion-mnist-m",
        "--data",
        str(data),
        "--steps",
        "3",
        "--seed",
        "0",
        "--out",
        str(out),
    ]
    status = package_cli.main(argv)
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert len(read) == len(NAMES), read  # each file once: the run trains on what the preflight read
    results = json.loads((out / "results.json").read_text())
    assert list(results["accuracy"]) == list(image_runs.IMAGE_METHODS)
    assert all(0.0 <= v[0] <= 1.0 for v in results["accuracy"].values())
    assert set(results["gap_closed"]) == {"dann", "cdan", "cdan_e", "mdd"}
    assert "gap closed" in printed and "target_trained" in printed
    assert results["export_method"] == "dann" and results["serving_check"] == 0
    for path in results["plots"].values():
        assert path is None or Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert printed.rstrip().splitlines()[-1] == str(out)


def test_a_run_without_the_preflight_reads_the_data_itself_once(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_fashion(data, n_train=20, n_test=10)
    read, read_idx = [], fashion_mnist.read_idx
    monkeypatch.setattr(fashion_mnist, "read_idx", lambda path: read.append(path) or read_idx(path))
    args = argparse.Namespace(data=str(data))  # as a caller that skips `preflight` passes it
    first = cli._image_data(args)
    assert cli._image_data(args) is first and len(read) == len(NAMES)
    assert first.x_train.shape[0] == 20 and first.directory == str(data)
