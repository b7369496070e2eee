"""``spotgpu --help`` and every non-preview command load only what they need; errors are one line.

Imports are checked in a fresh interpreter (``sys.modules`` after the call), so nothing an
earlier test imported can hide a regression. The speed itself is measured by
``bench/cli_help.py``, not here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spotgpu.cli import COMMANDS, main

HEAVY = ("pulumi", "components", "spotgpu_pulumi", "pydantic", "numpy", "yaml", "obstore", "boto3", "google", "azure")


def imported_after(argv: list[str]) -> tuple[int, list[str]]:
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from spotgpu.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = main({argv!r})
        print(json.dumps([rc, sorted({{m.split(".")[0] for m in sys.modules}})]))
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    rc, modules = json.loads(run.stdout.strip().splitlines()[-1])
    return rc, modules


@pytest.mark.parametrize("argv", [["--help"], [], ["--version"], ["no-such-command"]])
def test_top_level_imports_no_area(argv: list[str]) -> None:
    rc, modules = imported_after(argv)
    assert rc == (0 if argv in (["--help"], ["--version"]) else 2)
    assert [m for m in modules if m in HEAVY] == []


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in ("preview", "init")])  # both lay down or run a Pulumi project
def test_a_command_other_than_preview_never_loads_pulumi(command: str) -> None:
    rc, modules = imported_after([command, "--help"])
    assert rc == 0
    assert "pulumi" not in modules and "components" not in modules and "spotgpu_pulumi" not in modules


def test_ckpt_help_does_not_load_the_other_areas() -> None:
    _, modules = imported_after(["ckpt", "--help"])
    assert "pulumi" not in modules and "boto3" not in modules
    code = "import sys, contextlib, io\nfrom spotgpu.cli import main\n"
    code += "with contextlib.redirect_stdout(io.StringIO()): main(['ckpt', '--help'])\n"
    code += "print(sorted(m for m in sys.modules if m.startswith(('spotgpu.economics', 'spotgpu.controller', 'spotgpu.drills'))))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.strip() == "[]"


def test_help_lists_every_command_with_its_one_line_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name, command in COMMANDS.items():
        assert name in out and " ".join(command.help.split()) in out


def test_usage_errors_are_one_line_and_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drill", "aws"]) == 2
    err = capsys.readouterr().err
    assert err == "spotgpu drill aws: the following arguments are required: --pool; see `spotgpu drill aws --help`\n"
    assert main(["ckpt", "list", "/tmp", "--bogus"]) == 2
    assert capsys.readouterr().err == "spotgpu ckpt list: unrecognized arguments: --bogus; see `spotgpu ckpt list --help`\n"
    assert main([]) == 2  # no command: the help, on stderr
    assert "COMMAND" in capsys.readouterr().err


@pytest.fixture
def boom_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A throwaway command whose body raises what ``--raise`` names."""
    (tmp_path / "cli_boom_area.py").write_text(
        textwrap.dedent(
            """
            from spotgpu.config import ConfigError
            from spotgpu.cliutil import UserError

            def run(args):
                if args.what == "config":
                    raise ConfigError("spotgpu:pools[0].zones: must not be empty (value: []); fix: add a zone")
                if args.what == "user":
                    raise UserError("two\\nlines")
                if args.what == "missing":
                    open("/nonexistent/controller.yaml")
                if args.what == "exit":
                    raise SystemExit("spotgpu boom: cannot read x; fix: pass --config")
                raise RuntimeError("a bug")

            def register(sub):
                p = sub.add_parser("boom", help="test only")
                p.add_argument("--raise", dest="what", help="what to raise")
                p.set_defaults(func=run)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from spotgpu import cli

    monkeypatch.setitem(cli.COMMANDS, "boom", cli.Command("cli_boom_area", "test only"))


@pytest.mark.parametrize(
    ("what", "line"),
    [
        ("config", "spotgpu boom: spotgpu:pools[0].zones: must not be empty (value: []); fix: add a zone\n"),
        ("user", "spotgpu boom: two; lines\n"),
        ("missing", "spotgpu boom: /nonexistent/controller.yaml: No such file or directory\n"),
        ("exit", "spotgpu boom: cannot read x; fix: pass --config\n"),
    ],
)
def test_config_and_user_errors_are_one_line_exit_two(
    boom_command: None, what: str, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["boom", "--raise", what]) == 2
    assert capsys.readouterr().err == line


def test_a_bug_still_shows_its_traceback(boom_command: None) -> None:
    with pytest.raises(RuntimeError, match="a bug"):
        main(["boom", "--raise", "bug"])


def test_a_command_whose_extra_is_missing_says_which_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a GPU VM without the Pulumi extra sees for ``preview``, with a stand-in package."""
    (tmp_path / "cli_needs_area.py").write_text("import spotgpu_not_installed_xyz  # noqa: F401\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from spotgpu import cli

    monkeypatch.setitem(cli.COMMANDS, "needy", cli.Command("cli_needs_area", "needs more", "pulumi", "spotgpu_not_installed_xyz"))
    assert main(["--help"]) == 0
    assert "needs more (needs: pip install 'spotgpu[pulumi]')" in " ".join(capsys.readouterr().out.split())
    assert main(["needy", "--anything"]) == 2
    assert capsys.readouterr().err == (
        "spotgpu needy: needs a package that is not installed (spotgpu_not_installed_xyz); "
        "fix: pip install 'spotgpu[pulumi]'\n"
    )
