"""``spotgpu drill local``'s edge: one line naming the flag and the fix, and the command as torchrun gets it."""

from __future__ import annotations

import sys

import pytest

from spotgpu.cli import build_parser
from spotgpu.cliutil import UserError
from spotgpu.drills.local import LocalDrill, check_args, stop_step_findings


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


def stops(*entries: tuple[int | None, str]) -> dict[str, dict[str, object]]:
    return {f"node{i}": {"step": step, "outcome": outcome} for i, (step, outcome) in enumerate(entries)}


@pytest.mark.parametrize(
    ("entries", "finding"),
    [
        # Defect (CI on b74fd22): node 2 killed mid all-reduce; rank 0 had its result and failed at the next
        # step's stop check, ranks 1 and 3 failed inside step 31. The drill failed a correct recovery.
        (((32, "peer-lost"), (31, "peer-lost"), (31, "peer-lost")), None),
        (((30, "peer-lost"), (32, "peer-lost")), "more than one step apart"),
        (((12, "committed"), (12, "committed"), (12, "committed")), None),
        (((12, "committed"), (13, "committed")), "different steps: ['12', '13']"),
        (((12, "failed"), (12, "skipped")), None),
        (((12, "committed"), (None, "peer-lost")), "different steps"),
    ],
)
def test_stop_steps_agree_by_notice_and_lie_within_one_step_after_a_lost_peer(
    entries: tuple[tuple[int | None, str], ...], finding: str | None
) -> None:
    findings = stop_step_findings(stops(*entries))
    if finding is None:
        assert findings == []
    else:
        assert len(findings) == 1 and finding in findings[0]
