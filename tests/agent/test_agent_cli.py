"""``spotgpu agent run|status`` as the systemd unit runs them, in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.cli import load_config, render_status
from spotgpu.cli import main
from spotgpu.config import ConfigError
from spotgpu.contract.agent_status import SeenEvent
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import Checkpoint, ClearedNotice, NoticeDocument


def spotgpu(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "spotgpu", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


@pytest.mark.timeout(60)
def test_agent_run_acknowledges_and_status_reports_it(fakes: Any, tmp_path: Path) -> None:
    fake = fakes("azure")
    sock = os.path.join(tempfile.mkdtemp(prefix="sg"), "agent.sock")
    config = fast_config("azure", fake.url, control_socket=sock)
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config.model_dump(mode="json", by_alias=True, exclude_none=True)))
    agent = spotgpu("agent", "run", "--config", str(path))
    try:
        wait_until(lambda: os.path.exists(sock), timeout=30)
        eid = fake.raise_event("Preempt", not_before_in=20)
        wait_until(lambda: fake.acks[eid], timeout=10)
        status = spotgpu("agent", "status", "--control", sock, "--json")
        out, err = status.communicate(timeout=30)
        assert status.returncode == 0, err
        doc = json.loads(out)
        assert doc["phase"] == "drained"
        assert doc["acknowledged"] == [eid]
        assert doc["identity"]["instanceType"] == "Standard_NC4as_T4_v3"
        summary = spotgpu("agent", "status", "--control", sock)
        text, err = summary.communicate(timeout=30)
        assert summary.returncode == 0, err
        assert "phase:     drained (accepting work: no)" in text
        assert "Standard_NC4as_T4_v3" in text and "1 seen, 1 acknowledged" in text
        assert "\033[" not in text  # a pipe is not a terminal: no colour
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=15)
    assert agent.returncode == 0


def test_status_without_an_agent_says_so() -> None:
    status = spotgpu("agent", "status", "--control", "127.0.0.1:1")
    _, err = status.communicate(timeout=30)
    assert status.returncode == 1
    assert "no agent at 127.0.0.1:1" in err


def test_bad_config_names_the_key_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(
        json.dumps(
            {"provider": "oracle", "pool": "p", "notice": {}, "checkpointStore": "x", "checkpointIntervalSeconds": 60}
        )
    )
    with pytest.raises(ConfigError, match=r'provider: .*"oracle".*fix:'):
        load_config(str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "missing.json"))


def test_bad_config_is_one_line_and_exit_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "agent.json"
    path.write_text("{not json")
    assert main(["agent", "run", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"spotgpu agent run: {path} is not JSON")
    assert "Traceback" not in err


def test_status_summary_names_the_notice_and_the_deadline() -> None:
    doc = {
        "pool": "train", "provider": "aws", "phase": "final-checkpoint", "acceptingWork": False, "now": 100.0,
        "identity": {"instance_id": "i-1", "instance_type": "g5.xlarge"},
        "notice": NoticeDocument.told("e-1", InterruptionKind.PREEMPT, "aws/spot-instance-action", Checkpoint.FINAL,
                                      95.0, 130.0, 15.0).to_json(100.0),
        "finalReport": {"committed": True, "generation": "g-000042"}, "acknowledged": [],
        "events": [SeenEvent("e-1", InterruptionKind.PREEMPT, "aws/spot-instance-action", 95.0).to_json()],
    }  # fmt: skip
    text = render_status(doc)
    assert "pool:      train (aws)" in text
    assert "preempt from aws/spot-instance-action, deadline 00:02:10Z (in 30 s)" in text
    assert "final checkpoint: committed g-000042" in text


def test_status_summary_says_when_an_early_notice_cleared() -> None:
    doc = {
        "pool": "train", "provider": "aws", "phase": "running", "acceptingWork": True, "notice": None,
        "cleared": ClearedNotice("e-2", InterruptionKind.REBALANCE, "aws/rebalance-recommendation", 130.0).to_json(),
    }  # fmt: skip
    text = render_status(doc)
    assert "phase:     running (accepting work: yes)" in text
    assert "notice:    none (the rebalance notice from aws/rebalance-recommendation cleared at 00:02:10Z)" in text
