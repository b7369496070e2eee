"""What the agent serves about itself (``GET /v1/notice``, ``GET /v1/status``) is one typed value each in
spotgpu.contract (audit of issue 34): the status was a dict built in ``agent/daemon.py`` and read by key in
``agent/cli.py`` (``render_status``) and ``agent/client.py`` (``zone``, the notice snapshot)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from spotgpu.contract.agent_status import AgentStatus, ControllerLinkStatus, SeenEvent, WorkloadSnapshot
from spotgpu.contract.checkpoint_report import CheckpointReport, GangOutcome, GangRole, ReportKind, RestoreSource
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import Checkpoint, ClearedNotice, NoticeDocument

REPO = Path(__file__).resolve().parents[2]
NOW = 1_800_000_100.0
FINAL = CheckpointReport(ReportKind.FINAL, True, 42, 3.5, "g-42", "ok", received_at=NOW - 1)
GANG = CheckpointReport(ReportKind.GANG, False, 41, reason="peer lost: x", received_at=NOW - 2, role=GangRole.PEER,
                        noticed_ranks=[1], outcome=GangOutcome.PEER_LOST)  # fmt: skip
RESTORED = CheckpointReport(ReportKind.RESTORE, True, 40, 1.5, "g-40", received_at=NOW - 9,
                            source=RestoreSource.STORE, nbytes=1 << 20, started_at=NOW - 11)  # fmt: skip
NOTICE = NoticeDocument.told("e-1", InterruptionKind.PREEMPT, "aws/spot-instance-action", Checkpoint.FINAL,
                             NOW - 5, NOW + 115, 15.0)  # fmt: skip

FULL = AgentStatus(
    workload=WorkloadSnapshot(7, "final-checkpoint", NOW, NOTICE,
                              ClearedNotice("e-0", InterruptionKind.REBALANCE, "aws/rebalance", NOW - 60), FINAL, GANG,
                              RESTORED),
    provider="aws", pool="train", identity={"instance_id": "i-1", "zone": "us-east-1b"}, agent_ready_at=NOW - 300,
    telemetry_port=9464, events=[SeenEvent("e-1", InterruptionKind.PREEMPT, "aws/spot-instance-action", NOW - 5)],
    acknowledged=["e-1"], reports=[RESTORED, GANG, FINAL],
    controller=ControllerLinkStatus("s3://b/_controller/", "i-1", NOW - 1),
)
BARE = AgentStatus(workload=WorkloadSnapshot(0, "running", NOW))


@pytest.mark.parametrize("status", [FULL, BARE], ids=["full", "bare"])
def test_the_status_round_trips_through_its_served_json(status: AgentStatus) -> None:
    served = json.loads(json.dumps(status.to_json()))
    assert AgentStatus.from_json(served) == status
    assert WorkloadSnapshot.from_json(served) == status.workload  # the status carries the snapshot's keys
    assert served["stop"] is status.workload.stop and served["acceptingWork"] is status.workload.accepting_work


def test_an_older_agents_status_without_the_newer_keys_reads() -> None:
    older = {"version": 3, "phase": "running", "now": NOW, "notice": None, "pool": "train", "identity": {}}
    status = AgentStatus.from_json(older)
    assert status.pool == "train" and status.zone is None and status.reports == [] and status.controller is None
    assert (FULL.zone, FULL.instance_id, FULL.instance_type) == ("us-east-1b", "i-1", None)
    assert AgentStatus.from_json({**older, "phase": None}).workload.phase == "running"  # null reads as absent


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"telemetryPort": "9464"}, "status.telemetryPort: not a whole number (value: '9464')"),
        ({"version": True}, "status.version: not a whole number (value: True)"),
        ({"phase": "exploded"}, "status.phase: not one of running, early-checkpoint, final-checkpoint, draining, "
                                "drained (value: 'exploded')"),
        ({"reports": [{"checkpoint": "later"}]},
         "status.reports[0]: report.checkpoint: not one of early, final, gang, restore, step (value: 'later')"),
        ({"gang": {"checkpoint": "gang", "committed": False}},
         "status.gang: report.role: not one of noticed, peer (value: None)"),
        ({"events": [{"eventId": "e", "kind": "exploded"}]},
         "status.events[0].kind: not an interruption kind (value: 'exploded')"),
        ({"identity": {"zone": 3}}, "status.identity: not labels of strings (value: {'zone': 3})"),
        ({"controller": {"store": "s3://b/", "vmId": 7}}, "status.controller.vmId: not a string (value: 7)"),
        ({"agentReadyAt": float("inf")}, "status.agentReadyAt: not a time in epoch seconds (value: inf)"),
        ({"now": True}, "status.now: not a time in epoch seconds (value: True)"),
        ({"events": "e-1"}, "status.events: not a list (value: 'e-1')"),
        ({"acknowledged": ["e-1", 7]}, "status.acknowledged: not a list of event ids (value: ['e-1', 7])"),
        ({"reports": [{"checkpoint": "final", "committed": "yes"}]},
         "status.reports[0]: report.committed: not true or false (value: 'yes')"),
    ],
)  # fmt: skip
def test_a_key_of_the_wrong_type_is_one_line_naming_it(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        AgentStatus.from_json({**FULL.to_json(), **change})
    assert str(err.value) == message


#: Keys of the served status that only the contract may spell (``AgentStatus``, ``WorkloadSnapshot``).
STATUS_KEYS = {"acceptingWork", "finalReport", "agentReadyAt", "telemetryPort", "acknowledged", "lastReportedAt",
               "vmId", "detectedAt", "eventId", "restored", "identity", "zone", "instance_id", "instance_type",
               "version", "stop", "notice", "cleared", "now"}  # fmt: skip


def _string_keys(path: Path) -> set[str]:
    """String literals used as keys: subscripts, ``.get(...)`` first arguments, dict display keys."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript):
            candidates: list[ast.AST] = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            candidates = list(node.args[:1])
        elif isinstance(node, ast.Dict):
            candidates = [k for k in node.keys if k is not None]
        else:
            continue
        found.update(c.value for c in candidates if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return found


@pytest.mark.parametrize("module", ["agent/daemon.py", "agent/cli.py", "agent/client.py", "agent/state.py"])
def test_the_agent_its_cli_and_the_client_spell_no_status_key(module: str) -> None:
    """Defect: the daemon built the status as a dict, the CLI and the client read it back key by key."""
    assert sorted(_string_keys(REPO / "spotgpu" / module) & STATUS_KEYS) == []
