"""The agent's side of a gang: peer reports are recorded (state, metric, events log) and never
drain; restore reports are logged; malformed gang reports get one clear 400."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gang_testkit import fast_config, wait_until

from spotgpu.agent.client import AgentClient
from spotgpu.agent.daemon import Agent
from spotgpu.agent.fakes import FakeAwsImds
from spotgpu.agent.telemetry import AgentTelemetry


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    fake = FakeAwsImds(timeout_delay=1.0).start()
    running = Agent(fast_config("aws", fake.url), telemetry=AgentTelemetry(str(tmp_path / "events.jsonl"))).start()
    yield running
    running.stop()
    fake.stop()


def records(tmp_path: Path, kind: str) -> list[dict[str, object]]:
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["record"] == kind]


def post(agent: Agent, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    host, port = agent.control.url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("POST", "/v1/report", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read())


def test_a_peer_report_is_recorded_and_never_drains(agent: Agent, tmp_path: Path) -> None:
    client = AgentClient(agent.control.url)
    client.report(True, "gang", 116, role="peer", noticed_ranks=[1], outcome="committed", reason="preempt on rank(s) 1")
    snapshot = client._call("GET", "/v1/notice")
    assert snapshot["gang"]["role"] == "peer" and snapshot["gang"]["noticedRanks"] == [1]
    assert snapshot["phase"] == "running" and snapshot["finalReport"] is None and not snapshot["stop"]
    assert agent.status()["gang"]["step"] == 116  # type: ignore[index]
    sample = {"role": "peer", "outcome": "committed"}
    assert agent.telemetry.registry.get_sample_value("spotgpu_agent_gang_stops_total", sample) == 1
    logged = wait_until(lambda: records(tmp_path, "gang-stop"))
    assert logged[0]["role"] == "peer" and logged[0]["reason"] == "preempt on rank(s) 1"


def test_a_lost_peer_is_counted_as_such(agent: Agent) -> None:
    AgentClient(agent.control.url).report(False, "gang", 7, role="peer", reason="peer lost: the stop check ...")
    sample = {"role": "peer", "outcome": "peer-lost"}
    assert agent.telemetry.registry.get_sample_value("spotgpu_agent_gang_stops_total", sample) == 1


def test_the_resumed_step_is_logged(agent: Agent, tmp_path: Path) -> None:
    AgentClient(agent.control.url).report_restore(40, "step-40-abc")
    assert agent.state.restored is not None and agent.state.restored.step == 40
    assert wait_until(lambda: records(tmp_path, "restored"))[0]["generation"] == "step-40-abc"


def test_a_restore_says_where_from_how_long_how_much_and_the_first_step_follows(agent: Agent, tmp_path: Path) -> None:
    """Issue 33: each rank's ``restored`` record names its source, seconds and bytes (and why a nearer
    copy was passed over); the first step after it ends the recovery."""
    client = AgentClient(agent.control.url)
    client.report_restore(40, "g", source="peer", seconds=1.5, nbytes=1 << 30, reason="local copy failed: hash",
                          started_at=1000.0)  # fmt: skip
    client.report_first_step(41)
    [restored] = wait_until(lambda: records(tmp_path, "restored"))
    assert {k: restored[k] for k in ("step", "source", "seconds", "bytes", "reason", "startedAt")} == {
        "step": 40, "source": "peer", "seconds": 1.5, "bytes": 1 << 30, "reason": "local copy failed: hash",
        "startedAt": 1000.0}  # fmt: skip
    assert wait_until(lambda: records(tmp_path, "first-step"))[0]["step"] == 41
    assert agent.state.final_report is None  # neither is a final checkpoint


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"checkpoint": "gang", "committed": True}, "report.role: not one of noticed, peer (value: None)"),
        ({"checkpoint": "gang", "committed": True, "role": "leader"}, "report.role: not one of noticed, peer (value: 'leader')"),
        ({"checkpoint": "gang", "committed": True, "role": "peer", "noticedRanks": "1"}, "noticedRanks"),
        ({"checkpoint": "later", "committed": True}, "report.checkpoint: not one of early, final, gang, restore, step (value: 'later')"),
        ({"checkpoint": "restore", "source": "disk"}, "report.source: not one of local, peer, store (value: 'disk')"),
        ({"checkpoint": "restore", "bytes": -1}, "report.bytes: not a whole number of at least 0 (value: -1)"),
    ],
)
def test_a_malformed_gang_report_is_one_clear_error(agent: Agent, body: dict[str, object], message: str) -> None:
    status, answer = post(agent, body)
    assert status == 400 and message in str(answer["error"])
    assert agent.state.gang is None and agent.state.reports == []


def test_a_gang_that_lost_a_peer_during_the_notice_is_not_waited_for(agent: Agent) -> None:
    """Issue 33 drill: a node of the gang reclaimed with the noticed one: the noticed rank reports the lost
    peer instead of a final checkpoint, and its agent drains then, not at the end of the notice's budget."""
    import time

    from spotgpu.agent.state import CheckpointReport

    agent.state.set_phase("final-checkpoint")
    started = time.time()
    agent.state.add_report(CheckpointReport("gang", False, 15, role="peer", outcome="peer-lost", reason="peer lost"))
    report = agent.state.wait_final_report(started + 30)
    assert report is not None and report.outcome == "peer-lost" and time.time() - started < 5
