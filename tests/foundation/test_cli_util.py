"""``spotgpu.cliutil``: colour and progress only on a terminal, deprecated aliases, one-line errors."""

from __future__ import annotations

import argparse
import io

import pytest

from spotgpu import cliutil


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _colour_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cliutil.style("ok", "green", FakeTty()) == "\033[32mok\033[0m"
    assert cliutil.style("ok", "green", io.StringIO()) == "ok"
    monkeypatch.setenv("NO_COLOR", "1")
    assert cliutil.style("ok", "green", FakeTty()) == "ok"
    monkeypatch.setenv("NO_COLOR", "")  # empty means unset (no-color.org)
    assert cliutil.style("ok", "green", FakeTty()) != "ok"
    monkeypatch.setenv("TERM", "dumb")
    assert cliutil.style("ok", "green", FakeTty()) == "ok"


def test_progress_is_silent_off_a_terminal() -> None:
    stream = io.StringIO()
    with cliutil.Progress("verifying", stream) as progress:
        progress.update("1/3")
    assert stream.getvalue() == ""


def test_progress_on_a_terminal_draws_and_clears_its_line() -> None:
    stream = FakeTty()
    with cliutil.Progress("verifying", stream, interval=0.001) as progress:
        progress.update("2/3 (step 7)")
    text = stream.getvalue()
    assert "verifying" in text and "2/3 (step 7)" in text
    assert text.endswith("\r") and "\n" not in text  # the line is wiped, nothing is left behind


def test_deprecated_alias_stores_into_the_canonical_dest_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="spotgpu x")
    cliutil.add_seconds_flag(parser, "--poll-seconds", 10, "seconds between polls", aliases=("--poll",))
    assert parser.parse_args([]).poll_seconds == 10
    assert capsys.readouterr().err == ""
    assert parser.parse_args(["--poll", "3"]).poll_seconds == 3.0
    assert capsys.readouterr().err == "spotgpu x: --poll is deprecated; use --poll-seconds\n"
    assert "--poll " not in parser.format_help() and "--poll-seconds" in parser.format_help()


def test_generic_alias_for_any_flag(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(cliutil.DEPRECATED_ALIASES, "--hazard-traces", "--trace-group")
    parser = argparse.ArgumentParser(prog="spotgpu cost")
    parser.add_argument("--trace-group", help="trace group")
    cliutil.add_deprecated_alias(parser, "--hazard-traces", "--trace-group")
    assert parser.parse_args(["--hazard-traces", "1-node/aws"]).trace_group == "1-node/aws"
    assert "use --trace-group" in capsys.readouterr().err


def test_an_unregistered_alias_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="not a registered deprecated alias"):
        cliutil.add_seconds_flag(argparse.ArgumentParser(), "--poll-seconds", 1, "x", aliases=("--interval",))


def test_one_line_parser_errors(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cliutil.OneLineParser(prog="spotgpu y")
    parser.add_argument("--n", type=int)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--n", "x"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "spotgpu y: --n: invalid int value: 'x'; see `spotgpu y --help`\n"


def test_run_guarded_turns_user_errors_into_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    def bad() -> int:
        cliutil.fail("no such pool\nfix: check --pool")

    assert cliutil.run_guarded("spotgpu z", bad) == 2
    assert capsys.readouterr().err == "spotgpu z: no such pool; fix: check --pool\n"
    assert cliutil.run_guarded("spotgpu z", lambda: 0) == 0


def test_print_json_is_one_document() -> None:
    out = io.StringIO()
    cliutil.print_json({"a": 1, "when": object}, out)
    assert out.getvalue().startswith("{\n") and out.getvalue().endswith("}\n")
