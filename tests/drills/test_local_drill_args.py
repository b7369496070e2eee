"""``spotgpu drill local``'s edge: one line naming the flag and the fix, and the command as torchrun gets it."""

from __future__ import annotations

import sys

import pytest

from spotgpu.cli import build_parser
from spotgpu.cliutil import UserError
from spotgpu.drills.local import LocalDrill, check_args


def parse(*argv: str) -> LocalDrill:
    return check_args(build_parser(["drill"]).parse_args(["drill", "local", *argv]))


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--notice-node", "2", "--", "python", "job.py"], "--notice-node 2"),
        (["--provider", "gcp", "--lead-seconds", "30", "--", "python", "job.py"], "--lead-seconds"),
        (["--during-save", "--", "python", "job.py"], "--during-save"),
        (["--checkpoint-url", "s3://b/p", "--", "python", "job.py"], "--checkpoint-url 's3://b/p'"),
        ([], "CMD"),
    ],
)
def test_bad_input_is_one_line_with_the_fix(argv: list[str], start: str) -> None:
    with pytest.raises(UserError) as err:
        parse(*argv)
    assert str(err.value).startswith(start) and "fix:" in str(err.value) and "\n" not in str(err.value)


def test_one_node_is_a_drill_too_and_no_notice_just_runs_the_job() -> None:
    """Defect: ``drill local`` refused ``--nodes 1``, so a single-node job had no documented local agent."""
    assert parse("--nodes", "1", "--", "python", "job.py").nodes == 1
    assert parse("--nodes", "1", "--no-notice", "--", "python", "job.py").notice_node is None


@pytest.mark.parametrize(
    ("cmd", "torchrun"),
    [
        (["python", "-m", "pkg.job", "--x", "1"], ["-m", "pkg.job", "--x", "1"]),
        ([sys.executable, "job.py"], ["job.py"]),
        (["./train.sh", "a"], ["--no-python", "./train.sh", "a"]),
    ],
)
def test_the_command_becomes_torchruns_script(cmd: list[str], torchrun: list[str]) -> None:
    spec = parse("--", *cmd)
    assert spec.command == torchrun
