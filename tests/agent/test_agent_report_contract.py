"""The client posts, and the control server keeps, the contract's checkpoint report (audit of issue 34):
each call's body is :meth:`CheckpointReport.to_json` of the report it means, over real HTTP, and the
agent holds exactly what :meth:`CheckpointReport.from_json` reads from it."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spotgpu.agent.client import AgentClient
from spotgpu.agent.control import ControlServer
from spotgpu.agent.state import WorkloadState
from spotgpu.contract.checkpoint_report import CheckpointReport, GangOutcome, GangRole, ReportKind, RestoreSource


@pytest.fixture
def control() -> Iterator[ControlServer]:
    server = ControlServer("127.0.0.1:0", WorkloadState()).start()
    yield server
    server.stop()


SAVED = types.SimpleNamespace(committed=False, seconds=2.5, generation=types.SimpleNamespace(id="g7"), reason="slow")

#: Each client call, and the report it means (built here field by field, not by the client's helpers).
CALLS: list[tuple[str, Callable[[AgentClient], None], CheckpointReport]] = [
    ("periodic", lambda c: c.report(True, "early", 3), CheckpointReport(ReportKind.EARLY, True, 3)),
    ("final", lambda c: c.report(SAVED, "final", 7),
     CheckpointReport(ReportKind.FINAL, False, 7, 2.5, "g7", "slow")),
    ("gang", lambda c: c.report(SAVED, "gang", 7, role="peer", noticed_ranks=[0, 2], outcome="failed", reason="x"),
     CheckpointReport(ReportKind.GANG, False, 7, 2.5, "g7", "x", role=GangRole.PEER, noticed_ranks=[0, 2],
                      outcome=GangOutcome.FAILED)),
    ("restore", lambda c: c.report_restore(40, "g40", source="local", seconds=0.5, nbytes=9, started_at=100.0),
     CheckpointReport(ReportKind.RESTORE, True, 40, 0.5, "g40", source=RestoreSource.LOCAL, nbytes=9,
                      started_at=100.0)),
    ("first step", lambda c: c.report_first_step(41), CheckpointReport(ReportKind.STEP, False, 41)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "call", "meant"), CALLS, ids=[c[0] for c in CALLS])
def test_each_report_call_posts_the_contracts_body_and_the_agent_keeps_its_report(
    control: ControlServer, monkeypatch: pytest.MonkeyPatch, name: str, call: Callable[[AgentClient], None],
    meant: CheckpointReport,
) -> None:
    posted: list[dict[str, Any]] = []
    real = AgentClient._try

    def recording(self: AgentClient, method: str, path: str, body: Any = None, timeout: Any = None) -> Any:
        if path == "/v1/report":
            posted.append(body)
        answer = real(self, method, path, body, timeout)
        assert answer is not None, f"the agent refused {body}"
        return answer

    monkeypatch.setattr(AgentClient, "_try", recording)
    client = AgentClient(control.url, register=False)
    call(client)
    assert posted == [meant.to_json()]
    [kept] = control.state.reports
    assert kept == dataclasses.replace(meant, received_at=kept.received_at)
    assert kept == CheckpointReport.from_json(posted[0], received_at=kept.received_at)


def test_a_kind_outside_the_contract_is_the_loops_bug_raised_at_once(control: ControlServer) -> None:
    with pytest.raises(ValueError, match=r"^report\.checkpoint: not one of early, final, gang, restore, step \(value: 'later'\)$"):
        AgentClient(control.url, register=False).report(True, "later")
    with pytest.raises(ValueError, match=r"^report_restore\.source: not one of local, peer, store \(value: 'disk'\)$"):
        AgentClient(control.url, register=False).report_restore(1, "g", source="disk")
    assert control.state.reports == []
