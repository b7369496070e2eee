"""The gang launch: the restart rule, torchrun's flags, the epoch keys, the bootstrap unit, the CLI edge."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spotgpu.agent.config import AgentConfig
from spotgpu.bootstrap import GANG_UNIT, render_bootstrap
from spotgpu.cli import build_parser
from spotgpu.cliutil import UserError
from spotgpu.gang.exitcodes import EXIT_GANG_STOP, EXIT_PEER_LOST
from spotgpu.gang.launch import (
    EXIT_RDZV_CLOSED,
    EXIT_RDZV_TIMEOUT,
    Epochs,
    GangLaunch,
    RestartPolicy,
    check_torchrun_args,
    launcher_argv,
    torchrun_argv,
    worker_exit_code,
)
from spotgpu.gang.store import connect_store, serve_store
from spotgpu.models.notice import default_notice

SNAPSHOT = Path(__file__).parent / "snapshots" / "aws-gang.sh"
UPDATE = os.environ.get("SPOTGPU_UPDATE_SNAPSHOTS") == "1"

LAUNCH = GangLaunch(
    command=["/opt/job/venv/bin/train.py", "--ckpt", "s3://spotgpu-ckpt-prod/train-a100"],
    min_nodes=4,
    max_nodes=4,
    rendezvous_host="10.0.1.10",
    run_id="train-a100",
)
CONFIG = AgentConfig(
    provider="aws",
    pool="train-a100",
    notice=default_notice("aws").model_dump(mode="json", by_alias=True),
    checkpoint_store="s3://spotgpu-ckpt-prod/train-a100",
    checkpoint_interval_seconds=900,
)


# ---- the restart rule ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "leaving", "failures", "restart", "counted", "exit_code"),
    [
        (EXIT_GANG_STOP, False, 0, True, False, 0),  # clean gang stop: rejoin, never counted
        (EXIT_PEER_LOST, False, 3, True, False, 0),  # a lost peer: rejoin even after failures
        (EXIT_RDZV_CLOSED, False, 3, True, False, 0),  # joined a round that closed: re-read the epoch
        (EXIT_GANG_STOP, True, 0, False, False, 0),  # this VM is noticed: leave, drained
        (1, True, 0, False, False, 0),  # a noticed VM never rejoins, whatever the code
        (0, False, 0, False, False, 0),  # finished
        (1, False, 0, True, True, 0),  # a real failure, 1 of 3
        (1, False, 2, True, True, 0),  # 3 of 3
        (1, False, 3, False, True, 1),  # 4 > 3: give up with the code
        (EXIT_RDZV_TIMEOUT, False, 3, False, True, EXIT_RDZV_TIMEOUT),  # no replacement came: a real failure
    ],
)
def test_restart_policy(code: int, leaving: bool, failures: int, restart: bool, counted: bool, exit_code: int) -> None:
    decision = RestartPolicy(max_failures=3).decide(code, leaving=leaving, failures=failures)
    assert (decision.restart, decision.counted, decision.exit_code) == (restart, counted, exit_code)
    assert decision.why


def test_zero_max_failures_gives_up_at_once() -> None:
    assert not RestartPolicy(0).decide(1, leaving=False, failures=0).restart
    assert RestartPolicy(0).decide(EXIT_GANG_STOP, leaving=False, failures=0).restart


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([75], 75),
        ([75, 75], 75),
        ([75, 76], 76),  # one rank saw the loss: a lost peer
        ([76, 1], 1),  # a real failure wins
        ([-9], 137),  # a SIGKILLed worker: 128 + 9, a real failure
        ([75, -15], 143),
    ],
)
def test_worker_exit_code(codes: list[int], expected: int) -> None:
    assert worker_exit_code(codes) == expected


# ---- torchrun's flags -----------------------------------------------------------------------
def test_torchrun_argv_is_elastic_c10d_off_vm_without_torchrun_restarts() -> None:
    argv = torchrun_argv(LAUNCH)
    assert argv[0] == "torchrun" and argv[-3:] == LAUNCH.command[-3:]
    assert "--nnodes=4:4" in argv and "--rdzv-backend=c10d" in argv and "--max-restarts=0" in argv
    assert "--rdzv-endpoint=10.0.1.10:29400" in argv and "--rdzv-id=train-a100" in argv
    conf = next(a for a in argv if a.startswith("--rdzv-conf=")).removeprefix("--rdzv-conf=")
    assert dict(kv.split("=") for kv in conf.split(","))["is_host"] == "false"
    target = check_torchrun_args(argv)  # torch's own parser reads it back
    assert (target.host, target.port, target.run_id) == ("10.0.1.10", 29400, "train-a100")
    assert target.args.max_restarts == 0 and target.args.nnodes == "4:4"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("--rdzv-backend=c10d", "--rdzv-backend=static"), "--rdzv-backend"),
        (("--max-restarts=0", "--max-restarts=3"), "--max-restarts"),
        (("--rdzv-endpoint=10.0.1.10:29400", "--rdzv-endpoint=10.0.1.10"), "--rdzv-endpoint"),
        (("is_host=false,", ""), "--rdzv-conf"),
        (("torchrun", "python"), "command"),
    ],
)
def test_bad_torchrun_flags_are_one_line_with_the_fix(change: tuple[str, str], field: str) -> None:
    argv = [a.replace(*change) for a in torchrun_argv(LAUNCH)]
    with pytest.raises(UserError) as err:
        check_torchrun_args(argv)
    text = str(err.value)
    assert text.startswith(field) and "fix:" in text and "\n" not in text


def test_min_above_max_is_refused() -> None:
    with pytest.raises(ValueError, match="minNodes 3 > maxNodes 2"):
        GangLaunch(command=["x"], min_nodes=3, max_nodes=2, rendezvous_host="h", run_id="r")


def test_cli_refuses_bad_flags_with_exit_2() -> None:
    argv = [a.replace("--max-restarts=0", "--max-restarts=2") for a in torchrun_argv(LAUNCH)]
    proc = subprocess.run(
        [sys.executable, "-m", "spotgpu", "gang", "run", "--", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--max-restarts 2" in proc.stderr and "fix:" in proc.stderr


# ---- the epochs in the rendezvous store -------------------------------------------------------
def test_epochs_advance_once_per_incarnation_whoever_comes_first() -> None:
    server = serve_store("127.0.0.1", 0)
    a = Epochs(connect_store("127.0.0.1", server.port), "job")
    b = Epochs(connect_store("127.0.0.1", server.port), "job")
    assert a.current() == 0 and b.current() == 0
    assert a.advance_from(0) == 1  # the first node out moves the gang on
    assert b.advance_from(0) == 1  # the second finds it moved: no double bump
    assert b.current() == 1 and Epochs(connect_store("127.0.0.1", server.port), "other").current() == 0
    assert not a.is_done()
    b.mark_done()
    assert a.is_done()


# ---- the bootstrap unit ---------------------------------------------------------------------
def test_bootstrap_without_gang_is_unchanged() -> None:
    assert render_bootstrap(CONFIG) == render_bootstrap(CONFIG, gang=None)
    assert GANG_UNIT not in render_bootstrap(CONFIG)


def test_bootstrap_gang_unit_snapshot_and_its_command_parses() -> None:
    script = render_bootstrap(CONFIG, "spotgpu[aws,torch]", gang=LAUNCH)
    if UPDATE:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(script, encoding="utf-8")
    assert SNAPSHOT.exists(), f"missing snapshot {SNAPSHOT}; run with SPOTGPU_UPDATE_SNAPSHOTS=1 and review it"
    assert script == SNAPSHOT.read_text(encoding="utf-8")
    exec_start = next(line for line in script.splitlines() if line.startswith("ExecStart=/opt/spotgpu/venv/bin/spotgpu gang"))
    argv = shlex.split(exec_start.removeprefix("ExecStart="))
    assert argv == launcher_argv(LAUNCH, spotgpu="/opt/spotgpu/venv/bin/spotgpu")
    args = build_parser(["gang"]).parse_args(argv[1:])
    assert args.max_failures == LAUNCH.max_failures
    check_torchrun_args(args.torchrun[1:])  # after the "--"
    assert "Restart=on-abnormal" in script and f"Environment=SPOTGPU_AGENT={CONFIG.control_socket}" in script
