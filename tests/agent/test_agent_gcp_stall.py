"""GCP: a stalled hanging GET (the server accepts and never answers) must not hide a
preemption for more than a few seconds (issue 22, Agent contracts)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent import gcp
from spotgpu.agent.http import MetadataError, MetadataHttp, Response
from spotgpu.agent.transitions import Transitions
from spotgpu.contract.interruptions import InterruptionKind


@pytest.mark.timeout(60)
def test_a_preemption_behind_a_stalled_hanging_get_is_seen_within_seconds(fakes: Any, agents: Any) -> None:
    fake = fakes("gcp")
    fake.inject("wait_for_change", "stall", 1000)  # every hanging GET stalls from now on
    agent = agents(fast_config("gcp", fake.url, runtime={"hanging_get_timeout_seconds": 60}))
    wait_until(lambda: fake.count("GET", "wait_for_change=true") >= 2)  # both hanging GETs are stuck
    raised = fake.raise_preempted()
    wait_until(lambda: agent.state.phase != "running", timeout=15)
    [event] = agent.responder.store.all()
    assert event.kind is InterruptionKind.PREEMPT
    assert event.detected_at - raised < 3.0  # the plain read every 2 s, not the 65 s client timeout


@pytest.mark.timeout(30)
def test_the_hanging_get_gives_up_just_after_timeout_sec(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gcp.GcpMetadataClient(MetadataHttp(fake.url, timeout=0.5)), timeout_sec=1)
    monitor.check()  # plain read: ETag
    fake.inject("wait_for_change", "stall")
    started = time.monotonic()
    with pytest.raises(MetadataError, match="timed out"):
        monitor.check()
    assert time.monotonic() - started < 1 + gcp.HANGING_GET_SLACK_SECONDS + 0.5  # not timeout_sec + 5


def test_plain_reads_see_the_value_without_waiting_for_a_change(fakes: Any) -> None:
    fake = fakes("gcp")
    plain = gcp.PreemptedMonitor.plain_reads(gcp.GcpMetadataClient(MetadataHttp(fake.url, timeout=0.5)), every=2.0)
    assert plain.interval == 2.0
    assert plain.check() == []
    assert plain.check() == []  # still a plain read: it never hangs
    assert all("wait_for_change" not in path for _, _, path in fake.requests)
    fake.raise_preempted()
    [event] = plain.check()
    assert event.kind is InterruptionKind.PREEMPT and event.since_last_clean_poll is None  # the runner sets last_clean


def test_a_spoiled_answer_to_a_change_keeps_the_old_etag(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gcp.GcpMetadataClient(MetadataHttp(fake.url, timeout=0.5)), timeout_sec=5)
    monitor.check()
    fake.inject("wait_for_change", "malformed", 1, on_answer=True)
    fake.raise_preempted()
    with pytest.raises(MetadataError, match="unexpected value"):
        monitor.check()
    started = time.monotonic()
    [event] = monitor.check()  # the change is answered at once, not after timeout_sec
    assert event.kind is InterruptionKind.PREEMPT
    assert time.monotonic() - started < 1.0


class _Server:
    """One metadata value; a reader answers with the value at the moment the server read it."""

    def __init__(self) -> None:
        self.value = "NONE"


class _HeldClient(gcp.GcpMetadataClient):
    """A client whose next answer is held after the server read it (its thread descheduled)."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.hold: threading.Event | None = None

    def get(self, path: str, last_etag: str | None = None, timeout_sec: int = 60, read_timeout: float | None = None) -> Response:
        value = self.server.value  # what the server answered
        hold, self.hold = self.hold, None
        if hold is not None:
            hold.wait(5)
        return Response(200, {"etag": f"etag-{value}"}, value.encode())


@pytest.mark.timeout(30)
def test_a_late_answer_from_the_stall_guard_does_not_split_one_notice_in_two() -> None:
    """Defect (CI, 0f0ed0b): the guard read NONE, its thread paused, the hanging GET saw the
    value flip and observed it; then the guard's stale NONE counted as a new run, and its next
    read of the same value became a second notice 0.2 s after the first."""
    server = _Server()
    transitions = Transitions()
    hanging = gcp.MaintenanceMonitor(_HeldClient(server), timeout_sec=5, transitions=transitions)
    guard_client = _HeldClient(server)
    guard = gcp.MaintenanceMonitor.plain_reads(guard_client, every=0.2, transitions=transitions)
    assert hanging.check() == [] and guard.check() == []  # at rest; the hanging GET has its ETag

    seen: list[Any] = []
    held = threading.Event()
    guard_client.hold = held
    paused = threading.Thread(target=lambda: seen.extend(guard.check()))  # reads NONE, then pauses
    paused.start()
    time.sleep(0.2)
    server.value = "SHUTDOWN_ON_HOST_MAINTENANCE"
    flipped = threading.Thread(target=lambda: seen.extend(hanging.check()))
    flipped.start()
    time.sleep(0.3)
    held.set()
    paused.join(5)
    flipped.join(5)
    seen.extend(guard.check())
    assert not paused.is_alive() and not flipped.is_alive()
    ids = {e.event_id for e in seen if hasattr(e, "kind")}
    assert len(ids) == 1, ids


def test_an_unknown_value_is_logged_once_however_often_it_is_read(caplog: pytest.LogCaptureFixture) -> None:
    """Defect (audit of issue 36): the warning came on every read, every plain read (2 s) for as long as the
    value stayed; issue 36 asks for it once, with the value."""
    server = _Server()
    transitions = Transitions()
    hanging = gcp.MaintenanceMonitor(_HeldClient(server), timeout_sec=5, transitions=transitions)
    guard = gcp.MaintenanceMonitor.plain_reads(_HeldClient(server), every=0.2, transitions=transitions)
    hanging.check()
    server.value = "SHUTDOWN_ON_HOST_MAINTENANCE"
    with caplog.at_level("WARNING", logger="spotgpu.agent.gcp"):
        for _ in range(3):
            hanging.check()
            guard.check()
        server.value = "NONE"
        guard.check()
        server.value = "SHUTDOWN_ON_HOST_MAINTENANCE"  # back again: a new notice, logged again
        guard.check()
        hanging.check()
    lines = [r.getMessage() for r in caplog.records if "unknown value" in r.getMessage()]
    assert lines == ["gcp/maintenance-event: unknown value 'SHUTDOWN_ON_HOST_MAINTENANCE', read as maintenance"] * 2
