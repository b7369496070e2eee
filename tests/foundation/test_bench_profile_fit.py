"""``bench/profile_fit.py`` in small: its synthetic fleet is built through the contract and read back by it.

Issue 34: the bench built its lines by hand, so a renamed record field would have left it measuring
lines no producer writes. Now every line is a contract record as its producer writes it; this reads
each one back through the contract's own readers and runs both of the bench's readers on it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

from spotgpu.contract.agent_records import AgentRecordKind, read_agent_line
from spotgpu.contract.controller_events import ControllerEventKind, Event
from spotgpu.economics.telemetry import ReadStats
from spotgpu.economics.telemetry_files import read_files

BENCH = Path(__file__).resolve().parents[2] / "bench" / "profile_fit.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("profile_fit", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["profile_fit"] = module
    spec.loader.exec_module(module)
    return module


def test_the_bench_fleet_is_contract_records_and_both_readers_fit_it_alike(tmp_path: Path) -> None:
    bench = _bench()
    agents, controller = tmp_path / "agents.jsonl", tmp_path / "controller.jsonl"
    n_agent, n_ctl = bench.write_fleet(agents, controller, 5000)
    agent_kinds = Counter(read_agent_line(json.loads(line)).KIND for line in agents.open())  # type: ignore[union-attr]
    events = [Event.from_json(json.loads(line)) for line in controller.open()]
    vms = agent_kinds[AgentRecordKind.STARTED]
    assert sum(agent_kinds.values()) == n_agent and len(events) == n_ctl and vms > 50
    assert agent_kinds[AgentRecordKind.COMMIT_REPORTED] == bench.COMMITS_PER_VM * vms
    assert {e.kind for e in events if e is not None} == {
        ControllerEventKind.INTERRUPTION, ControllerEventKind.REACQUIRED, ControllerEventKind.LAUNCH_FAILURE,
    }  # fmt: skip
    stats = ReadStats()
    assert sum(1 for _ in read_files([agents, controller], stats=stats)) > 0
    assert stats.notes == []  # no line refused
    paths = [str(agents), str(controller)]
    naive, streaming = bench.run_variant("naive", paths), bench.run_variant("streaming", paths)
    assert naive["rate"] == streaming["rate"] and naive["reacquisition"] == streaming["reacquisition"]
    assert streaming["reacquisition"]
