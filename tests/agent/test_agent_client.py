"""The workload client against a bare control server (no cloud in the loop)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from spotgpu.agent.client import AgentClient
from spotgpu.agent.control import ControlServer, parse_address
from spotgpu.agent.state import WorkloadState
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import Checkpoint, NoticeDocument


@pytest.fixture
def control() -> Iterator[ControlServer]:
    server = ControlServer("127.0.0.1:0", WorkloadState()).start()
    yield server
    server.stop()


def final_notice(deadline: float, margin: float = 5.0) -> NoticeDocument:
    return NoticeDocument.told("e1", InterruptionKind.PREEMPT, "test", Checkpoint.FINAL, time.time(), deadline, margin)


@dataclass
class FinalSaveResult:
    committed: bool
    seconds: float
    generation: Any
    reason: str | None


class RecordingManager:
    def __init__(self) -> None:
        self.final_calls: list[tuple[int, object, float]] = []

    def save(self, step: int, state: object) -> Any:
        return type("GenerationInfo", (), {"generation": f"g{step}"})()

    def save_final(self, step: int, state: object, budget_seconds: float) -> FinalSaveResult:
        self.final_calls.append((step, state, budget_seconds))
        return FinalSaveResult(True, 0.25, self.save(step, state), None)


def test_should_stop_flips_within_milliseconds_of_a_final_notice(control: ControlServer) -> None:
    client = AgentClient(control.url)
    assert client.should_stop() is False
    time.sleep(0.1)  # the watcher is now long-polling
    changed = time.monotonic()
    control.state.set_notice("final-checkpoint", final_notice(time.time() + 60))
    while not client.should_stop():
        assert time.monotonic() - changed < 1.0
        time.sleep(0.001)
    assert time.monotonic() - changed < 0.1


def test_wait_for_notice_returns_early_notices_without_stopping(control: ControlServer) -> None:
    client = AgentClient(control.url)
    threading.Timer(
        0.1,
        lambda: control.state.set_notice(
            "early-checkpoint",
            NoticeDocument.told("e1", InterruptionKind.REBALANCE, "test", Checkpoint.EARLY, time.time(), None, 5.0),
        ),
    ).start()
    notice = client.wait_for_notice(timeout=5)
    assert notice is not None and notice.checkpoint == "early" and not notice.stop
    assert notice.budget_seconds(time.time()) == 0.0


def test_wait_for_notice_times_out_to_none(control: ControlServer) -> None:
    assert AgentClient(control.url).wait_for_notice(timeout=0.2) is None


def test_final_checkpoint_passes_the_remaining_budget_and_reports(control: ControlServer) -> None:
    client = AgentClient(control.url)
    control.state.set_notice("final-checkpoint", final_notice(time.time() + 60, margin=10))
    assert client.wait_for_notice(timeout=2) is not None
    manager = RecordingManager()
    result = client.final_checkpoint(manager, 42, {"w": 1})
    [(step, _state, budget)] = manager.final_calls
    assert step == 42 and 48 < budget <= 50
    report = control.state.final_report
    assert report is not None and report.committed and report.generation == "g42" and report.step == 42
    assert result.committed
    assert client.checkpoint_requested() is None  # served


def test_early_checkpoint_reports_a_committed_generation(control: ControlServer) -> None:
    client = AgentClient(control.url)
    client.early_checkpoint(RecordingManager(), 7, {})
    [report] = control.state.reports
    assert (report.checkpoint, report.committed, report.generation) == ("early", True, "g7")


def test_failed_final_save_is_reported_and_raised(control: ControlServer) -> None:
    class Broken(RecordingManager):
        def save_final(self, step: int, state: object, budget_seconds: float) -> FinalSaveResult:
            raise OSError("store unreachable")

    client = AgentClient(control.url)
    with pytest.raises(OSError):
        client.final_checkpoint(Broken(), 1, {})
    assert control.state.final_report is not None and not control.state.final_report.committed


def test_bad_report_is_a_400_naming_the_field(control: ControlServer) -> None:
    client = AgentClient(control.url, register=False)
    with pytest.raises(RuntimeError, match=re.escape("report.committed: not true or false (value: 'yes')")):
        client._call("POST", "/v1/report", {"checkpoint": "final", "committed": "yes"})


def test_no_agent_means_keep_training() -> None:
    client = AgentClient("127.0.0.1:1", timeout=0.2)
    assert client.should_stop() is False
    assert client.wait_for_notice(timeout=0.1) is None
    client.report(True)  # swallowed: training must go on


def test_ready_is_recorded_once(control: ControlServer) -> None:
    client = AgentClient(control.url)
    client.ready()
    first = control.state.workload_ready_at
    client.ready()
    assert first is not None and control.state.workload_ready_at == first


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("/run/spotgpu/agent.sock", ("unix", "/run/spotgpu/agent.sock")),
        ("unix:/tmp/a.sock", ("unix", "/tmp/a.sock")),
        ("127.0.0.1:9465", ("tcp", ("127.0.0.1", 9465))),
        ("http://localhost:80", ("tcp", ("localhost", 80))),
    ],
)
def test_parse_address(address: str, expected: tuple[str, object]) -> None:
    assert parse_address(address) == expected


def test_non_loopback_control_address_is_refused() -> None:
    with pytest.raises(ValueError, match="not loopback"):
        parse_address("10.0.0.5:9465")


def test_a_client_that_hangs_up_mid_long_poll_is_no_error(control: ControlServer, capfd: pytest.CaptureFixture[str],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """A rank killed during its long poll leaves the agent a broken pipe: normal, so no traceback on
    stderr (it used to print one, which another test then read as its own output)."""
    import logging
    import socket
    import struct

    host, port = control.url.split(":")
    caplog.set_level(logging.DEBUG, logger="spotgpu.agent.control")
    for _ in range(3):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"GET /v1/notice?since=-1&wait=0.2 HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        sock.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any("client left" in r.getMessage() for r in caplog.records):
        time.sleep(0.05)
    assert any("client left" in r.getMessage() for r in caplog.records), "the hang-up never reached the server"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Error" not in err, err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_stopping_the_server_ends_its_open_long_polls() -> None:
    """A long poll may wait 300 s; a stopped server must not keep its handler thread (and the reply
    to a client that is gone) alive that long into whatever runs next."""
    import json as _json
    import urllib.request

    server = ControlServer("127.0.0.1:0", WorkloadState()).start()
    answered: list[float] = []

    def poll() -> None:
        with urllib.request.urlopen(f"http://{server.url}/v1/notice?since=999&wait=60", timeout=90) as reply:
            _json.load(reply)
        answered.append(time.monotonic())

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    time.sleep(0.3)
    stopped = time.monotonic()
    server.stop()
    thread.join(10)
    assert answered and answered[0] - stopped < 5, "the long poll outlived the server"


def test_close_ends_the_watcher_even_mid_long_poll(control: ControlServer) -> None:
    client = AgentClient(control.url)
    assert client.should_stop() is False
    time.sleep(0.2)  # the watcher is now inside its 30 s long poll
    started = time.monotonic()
    client.close()
    assert client._watcher is not None and not client._watcher.is_alive()
    assert time.monotonic() - started < 2
