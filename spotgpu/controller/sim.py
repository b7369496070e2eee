"""A simulated cloud driven by real spot availability traces, for tests and benchmarks.

Each spot group follows one trace (``data[i]`` VMs can be held during tick ``i``);
the on-demand group always has capacity. VMs above what the trace allows are
interrupted (newest first), launches beyond it fail with a capacity error, and
a launched VM is ready after ``launch_seconds``. The node agent is modelled too:
it commits a checkpoint every ``checkpoint_interval`` seconds and, when asked to
drain, commits once more ``checkpoint_write_seconds`` later. Every removal is
logged with the VM's drain and commit times so tests can check that no VM was
scaled in before its workload committed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from spotgpu.controller.actions import RemoveInstance, RequestDrain, SetDesired
from spotgpu.controller.observe import (
    FailureReason,
    GroupObservation,
    Interruption,
    LaunchFailure,
    PoolObservation,
    Vm,
)
from spotgpu.controller.plan import PoolPlan, TickResult, reconcile
from spotgpu.controller.state import PoolState
from spotgpu.controller.store import JsonStore


@dataclass
class SimVm:
    id: str
    group: str
    launched_at: float
    ready_at: float
    last_commit: float | None = None
    drain_at: float | None = None


@dataclass(frozen=True)
class Removal:
    vm_id: str
    group: str
    at: float
    drain_at: float | None
    last_commit: float | None
    ready: bool


@dataclass
class SimGroup:
    name: str
    availability: np.ndarray | None  # None: unlimited (on-demand)
    gap_seconds: float
    desired: int = 0
    vms: dict[str, SimVm] = field(default_factory=dict)

    def available(self, now: float) -> int:
        if self.availability is None:
            return 10**6
        i = min(int(now // self.gap_seconds), len(self.availability) - 1)
        return int(self.availability[i])


class SimCloud:
    """Implements the controller's CloudAdapter protocol for one pool."""

    def __init__(
        self,
        pool: str,
        groups: dict[str, np.ndarray | None],
        gap_seconds: float,
        *,
        launch_seconds: float = 120.0,
        checkpoint_interval: float = 900.0,
        checkpoint_write_seconds: float = 30.0,
        initial: dict[str, int] | None = None,
        start: float = 0.0,
        drain_store: JsonStore | None = None,
    ) -> None:
        self.pool = pool
        self.drain_store = drain_store
        self.groups = {n: SimGroup(n, a, gap_seconds) for n, a in groups.items()}
        self.launch_seconds = launch_seconds
        self.checkpoint_interval = checkpoint_interval
        self.write_seconds = checkpoint_write_seconds
        self.removals: list[Removal] = []
        self.interruptions: list[Interruption] = []
        self.failures: list[LaunchFailure] = []
        self._seq = 0
        self._pending_events: list[Interruption] = []
        self._pending_failures: list[LaunchFailure] = []
        for name, n in (initial or {}).items():
            group = self.groups[name]
            group.desired = n
            for _ in range(n):
                self._launch(group, start - self.launch_seconds)

    # --- the cloud ---------------------------------------------------------
    def _launch(self, group: SimGroup, now: float) -> None:
        self._seq += 1
        vm = SimVm(f"{group.name}-vm{self._seq}", group.name, now, now + self.launch_seconds)
        group.vms[vm.id] = vm

    def advance(self, now: float) -> None:
        for group in self.groups.values():
            cap = group.available(now)
            extra = len(group.vms) - cap
            if extra > 0:
                for vm in sorted(group.vms.values(), key=lambda v: (-v.launched_at, v.id))[:extra]:
                    del group.vms[vm.id]
                    event = Interruption(f"{vm.id}-int", vm.id, "interruption", now)
                    self._pending_events.append(event)
                    self.interruptions.append(event)
            want = group.desired - len(group.vms)
            can = max(0, cap - len(group.vms))
            for _ in range(min(want, can)):
                self._launch(group, now)
            if want > can:
                failure = LaunchFailure(
                    group.name, FailureReason.CAPACITY, "InsufficientInstanceCapacity", now, f"{group.name}@{now:.0f}"
                )
                self._pending_failures.append(failure)
                self.failures.append(failure)
            for vm in group.vms.values():
                self._agent(vm, now)

    def _agent(self, vm: SimVm, now: float) -> None:
        """The node agent: periodic commits while working, one final commit on drain."""
        if now < vm.ready_at:
            return
        if vm.drain_at is not None:
            if now >= vm.drain_at + self.write_seconds:
                vm.last_commit = max(vm.last_commit or 0.0, vm.drain_at + self.write_seconds)
            return
        periods = int((now - vm.ready_at) // self.checkpoint_interval)
        if periods:
            vm.last_commit = vm.ready_at + periods * self.checkpoint_interval

    def request_drain(self, vm_id: str, at: float) -> None:
        for group in self.groups.values():
            if vm_id in group.vms and group.vms[vm_id].drain_at is None:
                group.vms[vm_id].drain_at = at

    # --- CloudAdapter ------------------------------------------------------
    def observe(self, now: float) -> PoolObservation:
        if self.drain_store is not None:  # the agent reads its drain request from the store
            for group in self.groups.values():
                for vm in group.vms.values():
                    doc = self.drain_store.get(f"drains/{self.pool}/{vm.id}.json")
                    if doc and vm.drain_at is None:
                        vm.drain_at = float(doc["requestedAt"])
        self.advance(now)
        groups = {
            g.name: GroupObservation(
                g.name,
                g.desired,
                tuple(Vm(v.id, g.name, now >= v.ready_at, ready_at=v.ready_at) for v in sorted(g.vms.values(), key=lambda v: v.id)),
            )
            for g in self.groups.values()
        }
        commits = {v.id: v.last_commit for g in self.groups.values() for v in g.vms.values() if v.last_commit is not None}
        obs = PoolObservation(
            self.pool, now, groups, tuple(self._pending_failures), tuple(self._pending_events), commits
        )
        self._pending_events, self._pending_failures = [], []
        return obs

    def apply(self, action: SetDesired | RemoveInstance, now: float | None = None) -> None:
        group = self.groups[action.group]
        if isinstance(action, SetDesired):
            group.desired = action.desired
            return
        vm = group.vms.pop(action.vm_id)
        group.desired = max(0, group.desired - 1)
        at = now if now is not None else vm.drain_at or 0.0
        self.removals.append(Removal(vm.id, group.name, at, vm.drain_at, vm.last_commit, at >= vm.ready_at))

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None


@dataclass
class ReplayReport:
    ticks: int = 0
    reacquisition_seconds: list[float] = field(default_factory=list)
    failures_by_reason: dict[str, int] = field(default_factory=dict)
    fallback_node_seconds: float = 0.0
    fallback_cost_usd: float = 0.0
    work_done_hours: float = 0.0
    deferrals: int = 0
    steps_reached: set[str] = field(default_factory=set)


def replay(
    plan: PoolPlan,
    cloud: SimCloud,
    start: float,
    end: float,
    tick: float,
    on_tick: Callable[[float, PoolObservation, PoolState, TickResult], None] | None = None,
) -> ReplayReport:
    """Run the planner against the simulated cloud from ``start`` to ``end``; pure Python, no I/O."""
    state = PoolState()
    report = ReplayReport()
    now = start
    while now < end:
        obs = cloud.observe(now)
        result = reconcile(plan, obs, state)
        for action in result.actions:
            if isinstance(action, SetDesired | RemoveInstance):
                cloud.apply(action, now)
            elif isinstance(action, RequestDrain):
                cloud.request_drain(action.vm_id, now)
        for event in result.events:
            if event.kind == "reacquired":
                report.reacquisition_seconds.append(event.data["latencySeconds"])
            elif event.kind == "launch_failure":
                reason = event.data["reason"]
                report.failures_by_reason[reason] = report.failures_by_reason.get(reason, 0) + 1
            elif event.kind == "deferred":
                report.deferrals += 1
        if result.step is not None:
            report.steps_reached.add(result.step.kind.value)
        if on_tick is not None:
            on_tick(now, obs, state, result)
        report.ticks += 1
        now += tick
    report.fallback_node_seconds = state.fallback_seconds
    report.fallback_cost_usd = state.fallback_cost_usd
    report.work_done_hours = state.work_done_hours
    return report
