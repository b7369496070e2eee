"""The workload's checkpoint report (``POST /v1/report``) is one typed value in spotgpu.contract.

Audit of issue 34: the body was built as a dict in ``agent/client.py`` and read key by key in
``agent/control.py``, so its twelve wire keys and its value sets (kinds, gang roles, restore sources)
were spelled in two places. Now :class:`~spotgpu.contract.checkpoint_report.CheckpointReport` writes
and reads it; these tests hold the round trip, the one-line errors, and both directions of
compatibility with the agents and workloads released before it.
"""

from __future__ import annotations

import ast
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from spotgpu.contract.checkpoint_report import CheckpointReport, GangOutcome, GangRole, ReportKind, RestoreSource

REPO = Path(__file__).resolve().parents[2]
#: The body's keys (``CheckpointReport.to_json``) but ``step`` and ``generation``, which are also the names of
#: the attributes the client reads off the checkpoint library's results.
WIRE_KEYS = {"checkpoint", "committed", "seconds", "reason", "role", "noticedRanks", "outcome", "source", "bytes",
             "startedAt"}  # fmt: skip

GANG: dict[str, Any] = {"role": GangRole.PEER, "noticed_ranks": [1, 3], "outcome": GangOutcome.COMMITTED}
RESTORE: dict[str, Any] = {"source": RestoreSource.PEER, "nbytes": 1 << 30, "started_at": 1_800_000_000.5}


def _cases() -> list[tuple[ReportKind, bool, bool]]:
    return [(kind, gang, restore) for kind, gang, restore in itertools.product(ReportKind, (False, True), (False, True))
            if gang or kind is not ReportKind.GANG]  # fmt: skip  (a gang report always has a role)


@pytest.mark.parametrize(("kind", "gang", "restore"), _cases())
def test_every_kind_round_trips_with_and_without_gang_and_restore_fields(
    kind: ReportKind, gang: bool, restore: bool
) -> None:
    report = CheckpointReport(
        kind, committed=kind is not ReportKind.STEP, step=40, seconds=1.25, generation="step-40-abc",
        reason="local copy failed: hash", received_at=1_800_000_001.0,
        **(GANG if gang else {}), **(RESTORE if restore else {}),
    )  # fmt: skip
    body = json.loads(json.dumps(report.to_json()))  # as the agent's control endpoint gets it
    assert CheckpointReport.from_json(body, received_at=report.received_at) == report
    assert body["checkpoint"] == kind.value and ("noticedRanks" in body) == gang and ("bytes" in body) == restore


def test_a_bare_report_writes_only_its_kind_and_whether_it_committed() -> None:
    assert CheckpointReport(ReportKind.FINAL, True).to_json() == {"checkpoint": "final", "committed": True}


#: The bodies the client sent before this contract (commit 75c2454's ``agent/client.py``), and the report
#: the agent made of each then: an older workload must still be read the same by this agent.
OLD_BODIES: list[tuple[dict[str, Any], CheckpointReport]] = [
    ({"checkpoint": "final", "step": None, "committed": True}, CheckpointReport(ReportKind.FINAL, True)),
    ({"checkpoint": "final", "step": 7, "committed": True, "seconds": 2.5, "generation": "g1", "reason": None},
     CheckpointReport(ReportKind.FINAL, True, 7, 2.5, "g1")),
    ({"checkpoint": "early", "step": 3, "committed": True, "generation": "g3"},
     CheckpointReport(ReportKind.EARLY, True, 3, generation="g3")),
    ({"checkpoint": "gang", "step": 7, "role": "peer", "noticedRanks": [], "outcome": None, "committed": False,
      "reason": "peer lost: the stop check failed"},
     CheckpointReport(ReportKind.GANG, False, 7, reason="peer lost: the stop check failed", role=GangRole.PEER,
                      noticed_ranks=[], outcome=GangOutcome.PEER_LOST)),
    ({"checkpoint": "restore", "step": 40, "generation": "g", "source": "store", "bytes": 12, "startedAt": 5},
     CheckpointReport(ReportKind.RESTORE, True, 40, generation="g", source=RestoreSource.STORE, nbytes=12,
                      started_at=5.0)),
    ({"checkpoint": "step", "step": 41}, CheckpointReport(ReportKind.STEP, False, 41)),
]  # fmt: skip


@pytest.mark.parametrize(("body", "report"), OLD_BODIES)
def test_an_older_workloads_body_reads_as_it_did(body: dict[str, Any], report: CheckpointReport) -> None:
    assert CheckpointReport.from_json(body, received_at=report.received_at) == report


def _old_agent_read(body: dict[str, Any]) -> dict[str, Any]:
    """What the agent before this contract (commit 75c2454, ``agent/control.py:_report``) made of a body."""
    kind = body.get("checkpoint", "final")
    assert kind in ("early", "final", "gang", "restore", "step")
    if kind == "restore":
        body = {"committed": True, **body}
    if kind == "step":
        body = {**body, "committed": False}
    assert isinstance(body.get("committed"), bool)
    role = body.get("role")
    assert role in (None, "noticed", "peer") and not (role is None and kind == "gang")
    outcome = None
    if role is not None:
        outcome = body.get("outcome") or ("committed" if body["committed"] else
                                          "peer-lost" if str(body.get("reason") or "").startswith("peer lost") else
                                          "failed")  # fmt: skip
    keys = ("step", "seconds", "generation", "reason", "noticedRanks", "source", "bytes", "startedAt")
    return {"checkpoint": kind, "committed": body["committed"], "role": role, "outcome": outcome,
            **{k: body.get(k) for k in keys}}  # fmt: skip


@pytest.mark.parametrize(("kind", "gang", "restore"), _cases())
def test_an_older_agent_reads_this_body_as_this_agent_does(kind: ReportKind, gang: bool, restore: bool) -> None:
    report = CheckpointReport(kind, committed=kind is not ReportKind.STEP, step=9,
                              **(GANG if gang else {}), **(RESTORE if restore else {}))  # fmt: skip
    new = CheckpointReport.from_json(report.to_json())
    assert _old_agent_read(report.to_json()) == {
        "checkpoint": new.checkpoint, "committed": new.committed, "role": new.role, "outcome": new.outcome,
        "step": new.step, "seconds": new.seconds, "generation": new.generation, "reason": new.reason,
        "noticedRanks": new.noticed_ranks, "source": new.source, "bytes": new.nbytes, "startedAt": new.started_at,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"checkpoint": "later", "committed": True}, "report.checkpoint: not one of early, final, gang, restore, step (value: 'later')"),
        ({"checkpoint": "final", "committed": "yes"}, "report.committed: not true or false (value: 'yes')"),
        ({"checkpoint": "gang", "committed": True}, "report.role: not one of noticed, peer (value: None)"),
        ({"checkpoint": "gang", "committed": True, "role": "leader"}, "report.role: not one of noticed, peer (value: 'leader')"),
        ({"checkpoint": "gang", "committed": True, "role": "peer", "noticedRanks": "1"},
         "report.noticedRanks: not a list of ranks (value: '1')"),
        ({"checkpoint": "gang", "committed": True, "role": "peer", "outcome": "won"},
         "report.outcome: not one of committed, failed, skipped, peer-lost (value: 'won'); fix: use one of them, or leave it out (the agent derives it from committed and reason)"),
        ({"checkpoint": "restore", "source": "disk"}, "report.source: not one of local, peer, store (value: 'disk')"),
        ({"checkpoint": "restore", "bytes": -1},
         "report.bytes: not a whole number of at least 0 (value: -1); fix: use the bytes restored"),
        ({"checkpoint": "restore", "startedAt": "noon"}, "report.startedAt: not a time in epoch seconds (value: 'noon')"),
        ({"checkpoint": "restore", "startedAt": float("nan")}, "report.startedAt: not a time in epoch seconds (value: nan)"),
        ({"checkpoint": "final", "committed": 1}, "report.committed: not true or false (value: 1)"),
        # Defect: step, seconds, generation and reason were taken as sent: a step "12" was stored as a string
        # and a reason 5 as a number, for the drill and the events log to trip over later.
        ({"checkpoint": "final", "committed": True, "step": "12"},
         "report.step: not a whole number of at least 0 (value: '12'); fix: use the training step, a whole number"),
        ({"checkpoint": "final", "committed": True, "step": True},
         "report.step: not a whole number of at least 0 (value: True); fix: use the training step, a whole number"),
        ({"checkpoint": "final", "committed": True, "seconds": "x"}, "report.seconds: not a number of at least 0 (value: 'x')"),
        ({"checkpoint": "final", "committed": True, "seconds": -1.0},
         "report.seconds: not a number of at least 0 (value: -1.0)"),
        ({"checkpoint": "final", "committed": True, "generation": 7}, "report.generation: not a string (value: 7)"),
        ({"checkpoint": "gang", "committed": False, "role": "peer", "reason": 5}, "report.reason: not a string (value: 5)"),
    ],
)  # fmt: skip
def test_a_body_that_is_not_a_report_is_one_line_naming_the_field(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        CheckpointReport.from_json(body)
    assert str(err.value) == message


def _string_constants(path: Path) -> set[str]:
    """The module's string literals, but attribute names (``getattr(result, "generation")``: a Python
    object's attribute, not a wire key) and docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            skipped.update(id(arg) for arg in node.args[1:2])
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and ast.get_docstring(node) is not None:
            skipped.add(id(node.body[0].value))  # type: ignore[attr-defined]
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped}  # fmt: skip


@pytest.mark.parametrize("module", ["spotgpu/agent/client.py", "spotgpu/agent/control.py", "spotgpu/agent/state.py"])
def test_the_client_and_the_agent_spell_no_report_key(module: str) -> None:
    """Defect: the client wrote the body's keys and the control server read them, each by hand."""
    assert sorted(_string_constants(REPO / module) & WIRE_KEYS) == []


@pytest.mark.parametrize("module", ["spotgpu/agent/client.py", "spotgpu/agent/control.py"])
def test_the_client_and_the_agent_spell_no_throughput_key(module: str) -> None:
    """Defect: the client built the ``/v1/throughput`` body by hand and the control server read it by hand
    (``steps`` is also the client's argument name, so it is not looked for)."""
    assert sorted(_string_constants(REPO / module) & {"stepSeconds", "gpuModel"}) == []
