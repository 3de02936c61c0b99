"""The console script `grad-reverse` that `pip install` puts on the PATH: it
is the same command line as `python -m grad_reverse`, and its usage lines
and errors name `grad-reverse`, the command the user typed."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grad_reverse import __main__ as cli

ROOT = Path(__file__).resolve().parents[2]

# What pip writes for a [project.scripts] entry `grad-reverse = "grad_reverse.__main__:main"`.
CONSOLE_SCRIPT = """\
import re
import sys
from grad_reverse.__main__ import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def run_console_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "bin" / cli.CONSOLE_SCRIPT
    script.parent.mkdir(exist_ok=True)
    script.write_text(CONSOLE_SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=dict(os.environ), timeout=300
    )


def test_pyproject_installs_the_console_script_that_main_recognizes():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    scripts = pyproject.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    assert re.search(rf'^{re.escape(cli.CONSOLE_SCRIPT)}\s*=\s*"grad_reverse\.__main__:main"', scripts, re.M), scripts


@pytest.mark.parametrize(
    "argv0, expected",
    [
        ("/home/user/venv/bin/grad-reverse", "grad-reverse"),
        ("grad-reverse", "grad-reverse"),
        (r"C:\venv\Scripts\grad-reverse.exe", "grad-reverse"),
        ("/home/user/venv/lib/python3.11/site-packages/grad_reverse/__main__.py", "python -m grad_reverse"),
        ("/usr/bin/some-other-tool", "python -m grad_reverse"),
        ("", "python -m grad_reverse"),
    ],
)
def test_program_name_is_what_the_user_typed(argv0, expected):
    assert cli.program_name(argv0) == expected


def test_console_script_help_names_grad_reverse(tmp_path):
    result = run_console_script(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: grad-reverse [-h]"), result.stdout
    assert "'grad-reverse COMMAND --help'" in result.stdout
    for command in cli.COMMANDS:
        assert command.name in result.stdout


def test_console_script_command_help_and_errors_name_grad_reverse(tmp_path):
    result = run_console_script(tmp_path, "info", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: grad-reverse info"), result.stdout
    result = run_console_script(tmp_path, "no-such-command")
    assert result.returncode == 2
    assert "grad-reverse: error: argument COMMAND: invalid choice: 'no-such-command'" in result.stderr, result.stderr


def test_console_script_runs_a_command(tmp_path):
    result = run_console_script(tmp_path, "info")
    assert result.returncode == 0, result.stderr
    assert "tensorflow_running" in result.stdout
