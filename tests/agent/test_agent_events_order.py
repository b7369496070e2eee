"""The agent's events log opens with its ``started`` record: the telemetry reader takes the VM's
pool from it and refuses a log whose first records name none."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.telemetry import AgentTelemetry


class SlowStart(AgentTelemetry):
    """Writes ``started`` late, as a loaded host may: every other thread gets to write first."""

    def log(self, record: str, **fields: object) -> None:
        if record == "started":
            time.sleep(0.5)
        super().log(record, **fields)


@pytest.mark.timeout(60)
def test_started_is_the_first_record_whatever_the_threads_do(fakes: Any, agents: Any, tmp_path: Path) -> None:
    """Defect: the monitors and the identity thread started first, so `ready` or `identity` could lead the log."""
    fake = fakes("aws")
    log = tmp_path / "events.jsonl"
    agents(fast_config("aws", fake.url), telemetry=SlowStart(str(log)))
    wait_until(lambda: log.exists() and '"record": "identity"' in log.read_text())
    records = [json.loads(x)["record"] for x in log.read_text().splitlines()]
    assert records[0] == "started", records
