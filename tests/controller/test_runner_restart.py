"""Controller.tick: restart safety, idempotence and the record in a file:// object store."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from controller_factories import aws_controller_config, workload

from spotgpu.contract.state_store import MemoryJsonStore, ObjectJsonStore
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.runner import RECORD_KEY, Controller, build_plans
from spotgpu.controller.telemetry import ControllerTelemetry
from spotgpu.simulation.twin import TwinCloud, twin_job_for
from spotgpu.traces import load_group

#: Every rung's groups: the primary, another zone, another SKU at its own price, and on-demand.
FOUR_GROUPS = (
    {"name": "spot-a", "role": "same_pool"},
    {"name": "spot-b", "role": "alternate_zone"},
    {"name": "spot-sku", "role": "alternate_sku", "pricePerHour": 1.8},
    {"name": "od", "role": "on_demand"},
)


def _config(state_url: str) -> ControllerConfig:
    return aws_controller_config(
        state_url,
        groups=FOUR_GROUPS,
        profile=workload(work_hours=100.0),
        waits=(300, 300, 300, 3600),
        stableSpotSeconds=120,
    )


def _sim(store: object, traces: dict[str, object] | None = None, gap: float | None = None) -> TwinCloud:
    """The digital twin of pool-a: 1-node traces for its spot groups, the agents reading drains from ``store``."""
    ts = load_group("1-node/aws-02-15-2023")
    plan = build_plans(_config("file:///unused"))["pool-a"]
    data = traces or {"spot-a": ts[0].data * 2, "spot-b": ts[1].data * 2, "spot-sku": ts[2].data * 2}
    return TwinCloud(
        plan,
        twin_job_for(plan.workload, plan.checkpoint_interval_seconds),
        data,  # type: ignore[arg-type]
        gap or ts[0].gap_seconds,
        0.0,
        drain_store=store,  # type: ignore[arg-type]
    )


class _Recording:
    """Wraps the simulated cloud to log what the controller applied."""

    def __init__(self, sim: TwinCloud) -> None:
        self.sim = sim
        self.applied: list[object] = []

    def observe(self, now: float):  # type: ignore[no-untyped-def]
        self.now = now
        return self.sim.observe(now)

    def apply(self, action: SetDesired | RemoveInstance) -> None:
        self.applied.append(action)
        self.sim.apply(action, self.now)

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None


def _run(tmp: Path, fresh_each_tick: bool, ticks: int) -> tuple[dict[str, object], list[object], TwinCloud]:
    url = f"file://{tmp}"
    config = _config(url)
    store = ObjectJsonStore(url)
    cloud = _Recording(_sim(store))
    controller = Controller(config, {"pool-a": cloud}, store)
    for i in range(ticks):
        if fresh_each_tick:  # what `spotgpu controller run --once` does: a new process per tick
            store = ObjectJsonStore(url)
            controller = Controller(config, {"pool-a": cloud}, store)
        controller.tick(i * 60.0)
    record = ObjectJsonStore(url).get(RECORD_KEY)
    assert record is not None
    return record, cloud.applied, cloud.sim


def test_one_process_per_tick_matches_a_long_lived_loop(tmp_path: Path) -> None:
    a, applied_a, sim_a = _run(tmp_path / "a", fresh_each_tick=False, ticks=900)
    b, applied_b, _ = _run(tmp_path / "b", fresh_each_tick=True, ticks=900)
    assert a == b
    assert applied_a == applied_b
    assert any(isinstance(x, RemoveInstance) for x in applied_a)  # the window includes a scale-in
    for r in sim_a.removals:
        assert r.drain_at is not None and r.last_commit is not None and r.last_commit >= r.drain_at


def test_a_repeated_tick_changes_nothing(tmp_path: Path) -> None:
    store = MemoryJsonStore()
    config = _config(f"file://{tmp_path}")
    cloud = _Recording(_sim(store))
    controller = Controller(config, {"pool-a": cloud}, store)
    for i in range(40):
        controller.tick(i * 60.0)
    before = len(cloud.applied)
    controller.tick(39 * 60.0)
    assert cloud.applied[before:] == []


def test_telemetry_json_lines_and_prometheus(tmp_path: Path) -> None:
    lines = io.StringIO()
    telemetry = ControllerTelemetry(json_lines=lines)
    store = MemoryJsonStore()
    cloud = _Recording(_sim(store))
    controller = Controller(_config(f"file://{tmp_path}"), {"pool-a": cloud}, store, telemetry)
    for i in range(900):
        controller.tick(i * 60.0)
    events = [json.loads(line) for line in lines.getvalue().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"launch_failure", "interruption", "reacquired", "step_changed", "fallback_usage"} <= kinds
    reg = telemetry.registry
    assert (
        reg.get_sample_value(
            "spotgpu_launch_failures_total", {"pool": "pool-a", "group": "spot-a", "reason": "capacity"}
        )
        or 0
    ) > 0
    assert (reg.get_sample_value("spotgpu_reacquisition_seconds_count", {"pool": "pool-a"}) or 0) >= 1
    assert (reg.get_sample_value("spotgpu_fallback_cost_usd_total", {"pool": "pool-a"}) or 0) > 0


def test_missing_adapter_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no cloud adapter for pool"):
        Controller(_config(f"file://{tmp_path}"), {}, MemoryJsonStore())


def test_no_capacity_anywhere_defers_through_the_scheduler_hook(tmp_path: Path) -> None:
    import numpy as np

    store = MemoryJsonStore()
    config = _config(f"file://{tmp_path}")
    zeros = np.zeros(1000, dtype=np.int16)
    sim = _sim(store, {"spot-a": zeros, "spot-b": zeros, "spot-sku": zeros, "od": zeros}, 195)
    telemetry = ControllerTelemetry()
    controller = Controller(config, {"pool-a": _Recording(sim)}, store, telemetry)
    for i in range(100):  # 100 min > 300 * 3 s of spot + 3600 s on on-demand
        controller.tick(i * 60.0)
    assert store.get("scheduler/pool-a.json") == {
        "state": "deferred",
        "reason": store.objects["scheduler/pool-a.json"]["reason"],
        "at": 4500.0,
    }
    assert telemetry.registry.get_sample_value("spotgpu_deferred", {"pool": "pool-a"}) == 1
    assert (
        telemetry.registry.get_sample_value(
            "spotgpu_ladder_step_seconds_count", {"pool": "pool-a", "step": "on_demand"}
        )
        or 0
    ) == 1


class _RefusingOnDemand(_Recording):
    """The cloud refuses every resize of the on-demand group (a quota or permission error)."""

    def apply(self, action: SetDesired | RemoveInstance) -> None:
        if isinstance(action, SetDesired) and action.group == "od" and action.desired > 0:
            raise RuntimeError("VcpuLimitExceeded")
        super().apply(action)


def test_a_refused_resize_backs_the_group_off_until_it_delivers_what_was_asked() -> None:
    zeros = load_group("1-node/aws-02-15-2023")[0].data * 0
    cloud = _RefusingOnDemand(_sim(MemoryJsonStore(), {"spot-a": zeros, "spot-b": zeros, "spot-sku": zeros}))
    store = MemoryJsonStore()
    config = _config("file:///unused")
    controller = Controller(config, {"pool-a": cloud}, store)
    for i in range(40):  # the spot rungs (900 s) pass, then on-demand is asked and refused
        controller.tick(i * 60.0)
    record = store.get(RECORD_KEY)
    assert record is not None
    backoff = record["pools"]["pool-a"]["backoff"]["od"]
    assert backoff["wanted"] == config.pools[0].capacity.target and backoff["attempts"] >= 2  # kept across refusals
