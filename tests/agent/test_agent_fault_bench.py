"""The fault bench (``bench/agent_faults.py``) in small: every provider under every fault of
the schedule, with test-speed timings, detects every notice within the bench's targets."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "agent_faults.py"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_faults", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["agent_faults"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
def test_small_fault_schedule_on_all_three_fakes() -> None:
    bench = load_bench()
    fast = bench.Timings(
        poll_interval_seconds=0.25,
        plain_read_seconds=0.5,
        error_backoff_seconds=0.25,
        request_timeout_seconds=2.0,
        hanging_get_timeout_seconds=60,  # a stalled hanging GET would hide the notice for 61 s
        settle_seconds=0.4,
    )
    cells = bench.run(bench.PROVIDERS, bench.FAULTS, samples=2, lanes=15, timings=fast)
    assert len(cells) == 15
    for (provider, fault), cell in cells.items():
        assert all(not math.isinf(s) for s in cell.samples), (provider, fault)
        assert cell.p99 <= bench.target_p99(provider, fault), (provider, fault, cell.samples)
    text = bench.table(cells)
    assert "gcp      hang" in text and "p99/base" in text
