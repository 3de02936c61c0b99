"""The command line: `--help` without TensorFlow, the static command table,
TensorFlow's start-up lines kept out of a command's output (and shown with
--verbose), and the package's import as a user's program sees it."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import grad_reverse
from grad_reverse import __main__ as cli
from grad_reverse import _startup


def run_python(*args, env_update=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(env_update or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def imported_modules(stderr: str) -> set:
    """Module names from `python -X importtime` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


# --- --help ---------------------------------------------------------------------


def test_help_lists_every_command_of_the_table_without_importing_tensorflow():
    result = run_python("-X", "importtime", "-m", "grad_reverse", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m grad_reverse")
    for command in cli.COMMANDS:
        assert command.name in result.stdout
    modules = imported_modules(result.stderr)
    assert "grad_reverse._startup" in modules  # the listing is real
    assert "tensorflow" not in modules and "keras" not in modules
    # Nothing else on stderr: no log line of anyone's.
    assert [line for line in result.stderr.splitlines() if not line.startswith("import time:")] == []


@pytest.mark.parametrize("command", ["demo", "example", "info", "bench", "check-serving", "make-servable"])
def test_our_commands_help_without_importing_tensorflow(command):
    result = run_python("-X", "importtime", "-m", "grad_reverse", command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m grad_reverse {command}")
    assert "--verbose" in result.stdout
    # TensorFlow 2.21's importtime output lists tensorflow.python.* but not
    # the `tensorflow` package line itself: look for any of its modules.
    assert not tensorflow_modules(imported_modules(result.stderr)), command


def tensorflow_modules(modules: set) -> set:
    return {m for m in modules if m.split(".")[0] == "tensorflow"}


def test_importtime_lines_pass_the_start_up_filter():
    # What the test above relies on: a command that does import TensorFlow
    # (inside the start-up filter) still lets -X importtime's lines through.
    result = run_python("-X", "importtime", "-m", "grad_reverse", "example")
    assert result.returncode == 0, result.stderr
    assert tensorflow_modules(imported_modules(result.stderr))


def test_every_table_module_is_a_module_of_the_package():
    import importlib.util

    for command in cli.COMMANDS:
        assert command.module.startswith("grad_reverse."), command
        assert importlib.util.find_spec(command.module) is not None, command


# --- running a command -------------------------------------------------------------


def test_a_command_prints_its_own_output_and_verbose_adds_tensorflows_start_up_lines():
    quiet = run_python("-m", "grad_reverse", "example")
    assert quiet.returncode == 0, quiet.stderr
    assert "dloss/dx" in quiet.stdout
    assert quiet.stderr == ""
    for verbose in (
        run_python("-m", "grad_reverse", "--verbose", "example"),
        run_python("-m", "grad_reverse", "example", "--verbose"),
    ):
        assert verbose.returncode == 0, verbose.stderr
        assert verbose.stdout == quiet.stdout
        # Whatever this TensorFlow says at start-up; on x86 TensorFlow 2.21
        # at least absl's notice and the oneDNN line.
        assert verbose.stderr != ""


def test_environment_quiet_by_default_untouched_with_verbose(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    cli.configure_tensorflow_environment(verbose=True)
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    cli.configure_tensorflow_environment(verbose=False)
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # the user's own setting wins
    cli.configure_tensorflow_environment(verbose=False)
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_a_listed_command_its_module_does_not_register_is_a_clear_error(capsys):
    missing = cli.Command("no-such-command", "help", "grad_reverse.example")
    with pytest.raises(SystemExit) as exit_info:
        cli.command_parser(missing)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "'no-such-command'" in err and "grad_reverse.example" in err and "registers example" in err


def test_unknown_command_is_an_argparse_error():
    result = run_python("-m", "grad_reverse", "no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr and "tensorflow" not in result.stderr.lower()


# --- the package as a user's program imports it ----------------------------------------


USER_PROGRAM = (
    "import logging, os, tensorflow as tf{extra}; "
    "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'), tf.get_logger().level, logging.getLogger().level)"
)


def test_import_binds_every_public_name_and_changes_no_log_setting():
    result = run_python(
        "-c",
        USER_PROGRAM.format(
            extra=", grad_reverse; print('unbound', [n for n in grad_reverse.__all__ if n not in vars(grad_reverse)])"
        ),
    )
    assert result.returncode == 0, result.stderr
    # Bound by the import itself (not on first use), `serving` included.
    assert "unbound []" in result.stdout
    without = run_python("-c", USER_PROGRAM.format(extra=""))
    assert result.stdout.splitlines()[-1] == without.stdout.splitlines()[-1]
    assert result.stdout.splitlines()[-1].split()[0] == "None"


def test_the_package_namespace_shows_only_its_api_and_its_modules():
    import types

    import grad_reverse

    public = {name: value for name, value in vars(grad_reverse).items() if not name.startswith("_")}
    strays = sorted(
        name
        for name, value in public.items()
        if name not in grad_reverse.__all__ and not isinstance(value, types.ModuleType)
    )
    assert strays == []
    # A module among them must be one of the package's own, not an import it made for itself.
    foreign = sorted(
        name
        for name, value in public.items()
        if isinstance(value, types.ModuleType) and not value.__name__.startswith("grad_reverse.")
    )
    assert foreign == []


def test_a_program_started_with_dash_m_that_imports_the_package_gets_it_loaded(tmp_path):
    # Only `python -m grad_reverse` defers the import; another -m program does not.
    package = tmp_path / "someone_elses_tool"
    package.mkdir()
    (package / "__init__.py").write_text("import grad_reverse\nLOADED = 'serving' in vars(grad_reverse)\n")
    (package / "__main__.py").write_text("from someone_elses_tool import LOADED\nprint('LOADED', LOADED)\n")
    result = run_python("-m", "someone_elses_tool", cwd=tmp_path)
    assert "LOADED True" in result.stdout, result.stderr


# --- how the command line is recognized, and what is filtered ------------------------------


@pytest.mark.parametrize(
    "argv, orig_argv, expected",
    [
        (["-m", "--help"], ["python", "-m", "grad_reverse", "--help"], True),
        (["-m"], ["python", "-B", "-m", "grad_reverse"], True),
        (["-m", "demo"], ["python", "-mgrad_reverse", "demo"], True),
        (["-m", "x"], ["python", "-m", "grad_reverse.__main__", "x"], True),
        (["-m", "x"], ["python", "-m", "other_tool", "x"], False),
        (["-m", "x"], ["python", "-m", "grad_reverse_other", "x"], False),
        (["-m", "x"], [], False),  # nothing to tell which module: import as usual
        (["/venv/bin/grad-reverse", "demo"], ["python", "/venv/bin/grad-reverse", "demo"], True),
        (["train.py"], ["python", "train.py"], False),
        (["-c"], ["python", "-c", "import grad_reverse"], False),
        ([], [], False),
    ],
)
def test_starting_command_line(argv, orig_argv, expected):
    assert _startup.starting_command_line(argv, orig_argv) is expected


ABSL_START = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796037021.958378    8469 port.cc:153] oneDNN custom operations are on.
I0000 00:00:1796037022.201088    8469 cpu_feature_guard.cc:227] This TensorFlow binary is optimized.
To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow.
W0000 00:00:1796037022.3    8469 some_file.cc:12] a warning that stays
E0000 00:00:1796037022.4    8469 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: (303)
E0000 00:00:1796037022.5    8469 other.cc:7] an error that stays
plain text that stays
I0000 00:00:1796037022.6    8469 port.cc:153] info again
import time:       254 |      25025 | grad_reverse
"""
TF215_START = """\
2023-08-29 12:35:30.891928: I tensorflow/core/util/port.cc:110] oneDNN custom operations are on.
2023-08-29 12:35:31.755679: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not find TensorRT
"""


def test_filter_drops_info_records_with_their_continuation_and_absl_preamble():
    kept = _startup.filter_start_up_lines(ABSL_START, gpu_found=True)
    assert kept.splitlines() == [
        "W0000 00:00:1796037022.3    8469 some_file.cc:12] a warning that stays",
        "E0000 00:00:1796037022.4    8469 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: (303)",
        "E0000 00:00:1796037022.5    8469 other.cc:7] an error that stays",
        "plain text that stays",
        "import time:       254 |      25025 | grad_reverse",
    ]


def test_filter_drops_the_cuda_driver_error_only_when_no_gpu_was_found():
    kept = _startup.filter_start_up_lines(ABSL_START, gpu_found=False)
    assert "cuInit" not in kept and "an error that stays" in kept


def test_filter_reads_tensorflow_215s_own_format():
    kept = _startup.filter_start_up_lines(TF215_START)
    assert kept.splitlines() == [TF215_START.splitlines()[1]]


def test_filtered_block_passes_python_stderr_straight_through(capfd):
    with _startup.tensorflow_start_filtered():
        sys.stderr.write("from python\n")
        os.write(2, b"I0000 00:00:1.0    1 x.cc:1] native info\nW0000 00:00:1.0    1 x.cc:2] native warning\n")
    err = capfd.readouterr().err
    assert err == "from python\nW0000 00:00:1.0    1 x.cc:2] native warning\n"


def test_a_log_handler_made_inside_the_filter_still_writes_after_it(capfd):
    # TensorFlow makes its logger's handler while it loads, i.e. inside the block.
    with _startup.tensorflow_start_filtered():
        handler = logging.StreamHandler()  # takes sys.stderr as it is now
    handler.emit(logging.makeLogRecord({"msg": "after the block", "levelno": logging.WARNING}))
    handler.flush()
    assert "after the block" in capfd.readouterr().err


def test_a_bad_grad_reverse_backward_is_one_line_and_exit_status_2():
    result = run_python("-m", "grad_reverse", "info", env_update={"GRAD_REVERSE_BACKWARD": "bogus"})
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if "GRAD_REVERSE_BACKWARD" in line]
    assert lines == [
        "python -m grad_reverse: GRAD_REVERSE_BACKWARD='bogus' is not a valid value; "
        "accepted values: auto (the default), native, stock."
    ]
    assert "Traceback" not in result.stderr


def test_version_prints_the_version_without_a_command(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"grad-reverse {grad_reverse.__version__}"


def test_version_with_the_real_command():
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "--version"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"grad-reverse {grad_reverse.__version__}"
    assert "COMMAND is required" not in result.stderr


@pytest.mark.parametrize("command", [["check-serving"], ["make-servable"]], ids=["check-serving", "make-servable"])
@pytest.mark.parametrize(
    "kind, says",
    [
        ("missing", "no such directory"),
        ("file", "not a directory (a SavedModel is a directory)"),
        ("empty", "not a SavedModel directory: it has no saved_model.pb (or saved_model.pbtxt)"),
    ],
)
def test_a_bad_serving_path_is_reported_before_tensorflow_loads(tmp_path, command, kind, says):
    # A `tensorflow` that refuses to import, first on the path: the answer
    # must come without it.
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('tensorflow was imported')\n")
    path = tmp_path / "saved_model"
    if kind == "file":
        path.write_text("not a SavedModel")
    if kind == "empty":
        path.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(Path(grad_reverse.__file__).parents[1])]))
    args = [*command, str(path)] + ([str(tmp_path / "dst")] if command == ["make-servable"] else [])
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"{command[0]}: error: {path}: {says}"
    assert not (tmp_path / "dst").exists()


def without_tensorflow(tmp_path) -> dict:
    """An environment whose `tensorflow` refuses to import, first on the path."""
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('tensorflow was imported')\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(Path(grad_reverse.__file__).parents[1])]))


@pytest.mark.parametrize(
    "args, says",
    [
        (["bench", "--quik"], "unrecognized arguments: --quik"),
        (["bench", "--sizes", "3X"], "argument --sizes: '3X' is not a size"),
        (["bench", "--dtype", "int8"], "argument --dtype: invalid choice: 'int8'"),
        (["demo", "--quik"], "unrecognized arguments: --quik"),
        (["info", "--quik"], "unrecognized arguments: --quik"),
        (["example", "--quik"], "unrecognized arguments: --quik"),
        (["check-serving", "--quik", "x"], "unrecognized arguments: --quik"),
        (["make-servable", "--quik", "x", "y"], "unrecognized arguments: --quik"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_typo_or_a_bad_value_gets_the_commands_own_usage_before_tensorflow_loads(tmp_path, args, says):
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", *args],
        capture_output=True,
        text=True,
        env=without_tensorflow(tmp_path),
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"usage: python -m grad_reverse {args[0]} "), result.stderr
    assert f"python -m grad_reverse {args[0]}: error: {says}" in result.stderr
    assert "tensorflow was imported" not in result.stderr


def test_the_bench_options_dtypes_are_the_ops():
    from grad_reverse.bench import settings

    assert tuple(d.name for d in grad_reverse.SUPPORTED_DTYPES) == settings.DTYPES


def test_info_says_what_streaming_stores_are_in_plain_words(monkeypatch, capsys):
    from grad_reverse import info

    monkeypatch.setattr(info, "collect", lambda: {"cpu_path": "avx2", "streaming_stores": "off (forced at run time)"})
    info.print_info()
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["streaming_stores", "off", "(forced", "at", "run", "time)"]
    assert "bypass the CPU cache" in lines[2] and "results are the same" in lines[2], lines
    assert lines[2].startswith(" " * 28), "the explanation sits under the value"


@pytest.mark.parametrize(
    "dst_kind, says",
    [
        ("file", "exists and is not a directory; not replacing it: choose another DST"),
        ("saved_model", "already exists; pass --overwrite to replace it"),
        ("inside_src", "DST must be outside SRC"),
    ],
)
def test_a_bad_make_servable_destination_is_reported_before_tensorflow_loads(tmp_path, dst_kind, says):
    # As for a bad SRC above: a `tensorflow` that refuses to import comes first on the path.
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('tensorflow was imported')\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "saved_model.pb").write_bytes(b"")  # SRC passes the checks made before TensorFlow loads
    dst = src / "copy" if dst_kind == "inside_src" else tmp_path / "dst"
    if dst_kind == "file":
        dst.write_text("someone's file")
    elif dst_kind == "saved_model":
        dst.mkdir()
        (dst / "saved_model.pb").write_bytes(b"")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(Path(grad_reverse.__file__).parents[1])]))
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "make-servable", str(src), str(dst)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith(f"make-servable: error: {dst}: {says}"), result.stderr
    assert "tensorflow was imported" not in result.stderr
