"""The digital twin: the production planner against a cloud and a job built from availability traces.

There is one ladder: :func:`spotgpu.controller.plan.reconcile`, the function the
controller calls every tick. The twin feeds it observations from a simulated cloud
and applies its actions there, so what ``spotgpu simulate --policy ladder`` and
``bench/twin.py`` measure is the controller's own decision code.

The simulated cloud (:class:`TwinCloud`, a ``CloudAdapter``):

* one group per trace (``data[i]`` VMs can be held during tick ``i``) plus an
  unlimited on-demand group; VMs above what the trace allows are interrupted,
  newest first, and an :class:`Interruption` event is delivered (optionally a
  notice ``notice_seconds`` earlier, in which the agent writes a final checkpoint
  when it fits);
* a launch asks the group; what the trace (or a group's ``quota``) cannot give
  fails with a capacity (or quota) :class:`LaunchFailure`, and the cloud keeps
  trying the open request whenever capacity appears, as ASGs, MIGs and scale sets do;
* a VM is ready ``restart_seconds`` (boot) after its launch and billed from launch
  to removal or loss, at its group's price, while the job runs.

The job and its agents (:class:`TwinJob`): when the pool holds ``nodes`` primary
nodes' worth of GPUs in ready VMs that are not draining, the job forms a gang on the
cheapest work (price per GPU and per unit of speed: a 4-GPU type standing in for an
8-GPU primary gives twice the nodes) and steps at its slowest member's speed
(``gpu.relativeThroughput``); it loads the
checkpoint (``checkpoint_load_seconds``), then commits every interval of work
(``interval_seconds`` of work, ``checkpoint_write_seconds`` to write); each gang
VM's agent reports each commit (time and step, one step = one second of work).
Losing a gang VM loses the work since the last commit. A drain request makes the
agent write a final checkpoint and report it ``checkpoint_write_seconds`` later.

:func:`run_twin` drives ``reconcile`` on the controller's tick grid. It skips
ticks in which neither the cloud changed nor :func:`~spotgpu.controller.plan.next_wake`
says a decision could; a test checks that the outcome equals ticking every time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np

from spotgpu.contract.state_store import JsonStore
from spotgpu.controller.actions import Defer, RemoveInstance, RequestDrain, Resume, SetDesired
from spotgpu.controller.config import GroupSpec
from spotgpu.controller.observe import (
    FailureReason,
    GroupObservation,
    Interruption,
    LaunchFailure,
    PoolObservation,
    Vm,
)
from spotgpu.controller.plan import PoolPlan, TickResult, commits_matter, next_wake, reconcile
from spotgpu.controller.state import PoolState
from spotgpu.controller.strategies import make_strategy
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import WorkloadProfile

_EPS = 1e-9


@dataclass(frozen=True)
class TwinJob:
    """The workload's mechanics, in seconds."""

    work_seconds: float
    deadline_seconds: float
    interval_seconds: float
    write_seconds: float
    boot_seconds: float  # restartSeconds: launch to ready
    load_seconds: float  # checkpointLoadSeconds: gang formed to working
    nodes: int = 1
    penalty_per_hour: float = 0.0

    @property
    def total_steps(self) -> int:
        return max(1, math.ceil(self.work_seconds))


@dataclass
class TwinVm:
    id: str
    group: str
    price: float
    launched_at: float
    ready_at: float
    drain_at: float | None = None
    report: tuple[float, int | None] | None = None  # last commit its agent reported: (time, step or None)
    units: float = 1.0  # primary nodes' worth of GPUs (a 4-GPU node standing in for 8-GPU ones: 0.5)
    speed: float = 1.0  # its GPUs' work per hour against the reference type (gpu.relativeThroughput)


@dataclass(frozen=True)
class Removal:
    vm_id: str
    group: str
    at: float
    drain_at: float | None
    last_commit: float | None


@dataclass
class TwinGroup:
    name: str
    role: StepKind
    price: float
    #: Plain lists, not arrays: the twin reads one element at a time, where numpy scalars are slow.
    availability: list[int] | None  # VMs the trace allows per tick; None: unlimited (on-demand)
    next_change: list[int] | None  # index of the next tick whose availability differs (len = ticks)
    quota: int | None = None
    desired: int = 0
    vms: dict[str, TwinVm] = field(default_factory=dict)
    last_cap: int = -1  # capacity at the last launch attempt (a change with the request open retries it)
    trace: np.ndarray | None = None  # the availability trace itself, for ``next_below``
    version: int = 0  # bumped on every change, so an unchanged group's observation is reused
    #: (version, valid until: the next pending VM's ready time, observation)
    seen: tuple[int, float, GroupObservation] | None = None
    units: float = 1.0  # one node, in primary nodes' worth of GPUs (PoolPlan.units)
    speed: float = 1.0  # work per hour of its GPU model against the reference type (PoolPlan.speed)

    def next_below(self, held: int) -> list[int] | None:
        """For each tick i, the first tick j > i whose availability is below ``held`` (None: on-demand)."""
        return None if self.trace is None else _next_below_cached(self.trace, held)

    def observation(self, now: float) -> GroupObservation:
        if self.seen is not None and self.seen[0] == self.version and now + _EPS < self.seen[1]:
            return self.seen[2]
        vms = sorted(self.vms.values(), key=lambda v: v.id)
        obs = GroupObservation(self.name, self.desired, tuple(Vm(v.id, self.name, now + _EPS >= v.ready_at, ready_at=v.ready_at) for v in vms))
        pending = [v.ready_at for v in vms if now + _EPS < v.ready_at]
        self.seen = (self.version, min(pending) if pending else math.inf, obs)
        return obs


_T = TypeVar("_T")
_TRACE_CACHE: dict[tuple[int, int, int | None], tuple[np.ndarray, Any]] = {}


def _per_trace(avail: np.ndarray, held: int | None, build: Callable[[], _T]) -> _T:
    """``build()`` once per trace array (and count held): a bench replays the same traces thousands of times."""
    key = (id(avail), len(avail), held)
    hit = _TRACE_CACHE.get(key)
    if hit is None or hit[0] is not avail:
        if len(_TRACE_CACHE) > 4096:
            _TRACE_CACHE.clear()
        hit = (avail, build())
        _TRACE_CACHE[key] = hit
    return cast(_T, hit[1])


def _trace_lists_cached(avail: np.ndarray) -> tuple[list[int], list[int]]:
    """(availability, ``_next_change``) as lists."""
    return _per_trace(avail, None, lambda: ([int(x) for x in np.asarray(avail).tolist()], _next_change(avail).tolist()))


def _next_below_cached(avail: np.ndarray, held: int) -> list[int]:
    """``_next_below`` as a list."""
    return _per_trace(avail, held, lambda: _next_below(avail, held).tolist())


def _first_after(ticks: np.ndarray, n: int) -> np.ndarray:
    """For each tick i < n, the first of the sorted ``ticks`` that is > i (n when none)."""
    out = np.full(n, n, dtype=np.int64)
    idx = np.searchsorted(ticks, np.arange(n), side="right")
    ok = idx < len(ticks)
    out[ok] = ticks[idx[ok]]
    return out


def _next_below(avail: np.ndarray, held: int) -> np.ndarray:
    """For each tick i, the first tick j > i with ``avail[j] < held`` (len(avail) when none: the trace's end allows 0)."""
    return _first_after(np.flatnonzero(np.asarray(avail) < held), len(avail))


def _next_change(avail: np.ndarray) -> np.ndarray:
    """For each tick i, the first tick j > i with a different value (len(avail) when none)."""
    return _first_after(np.flatnonzero(avail[1:] != avail[:-1]) + 1, len(avail))  # ticks unlike the one before


class TwinCloud:
    """One pool's simulated cloud and job; implements the controller's CloudAdapter protocol."""

    def __init__(
        self,
        plan: PoolPlan,
        job: TwinJob,
        traces: dict[str, np.ndarray],
        gap_seconds: float,
        start: float,
        *,
        quota: dict[str, int] | None = None,
        notice_seconds: float = 0.0,
        initial: bool = True,
        drain_store: JsonStore | None = None,
    ) -> None:
        self.plan, self.job, self.gap = plan, job, float(gap_seconds)
        self.start = start
        self.notice_seconds = notice_seconds
        #: With a store, the agents read drain requests where a real controller writes them
        #: (``drains/<pool>/<vm>.json``) and report commits there too (``agents/<pool>/<vm>.json``).
        self.drain_store = drain_store
        self.groups: dict[str, TwinGroup] = {}
        for g in plan.groups:
            avail = traces.get(g.name)
            if avail is None and g.role is not StepKind.ON_DEMAND:
                raise ValueError(f"group {g.name} has no trace; give one per spot group")
            lists = None if avail is None else _trace_lists_cached(avail)
            self.groups[g.name] = TwinGroup(
                g.name, g.role, plan.price(g), None if lists is None else lists[0], None if lists is None else lists[1],
                (quota or {}).get(g.name),
                trace=avail,
                units=plan.units(g.name),
                speed=plan.speed(g.name),
            )
        self.t = start
        self._seq = 0
        self._events: list[Interruption] = []
        self._failures: list[LaunchFailure] = []
        self._departed: dict[str, tuple[float, int | None]] = {}
        self.removals: list[Removal] = []
        self._group_list = list(self.groups.values())
        self._version = 0  # bumped with every group's version (see ``_changed``)
        #: (cloud version, the groups holding VMs or asking for them): see ``_active``
        self._active_seen: tuple[int, list[TwinGroup]] = (-1, [])
        #: (cloud version, valid until, observations): see ``_group_observations``
        self._groups_seen: tuple[int, float, dict[str, GroupObservation]] | None = None
        #: (after, cloud version, result) of the last ``_next_group_change``: it reads only the groups'
        #: VMs and requests (every change bumps the version), and the twin asks twice per wake: for
        #: the jump, and when the next observation advances to it
        self._internal_seen: tuple[float, int, float] | None = None
        self.interruptions = 0
        self.failures_by_reason: dict[str, int] = {}
        # the job
        self.gang: tuple[str, ...] = ()
        self.gang_speed = 1.0  # the slowest gang member's speed: a synchronous gang steps at its pace
        self.gangs: list[tuple[str, ...]] = []  # each gang formed, as its members' groups (its shape)
        self.phase = "idle"  # idle | loading | running | stopping | done
        self.phase_until = math.inf
        self.run_start = 0.0
        self.base = 0.0  # committed work (s) when the current run started
        self.committed = 0.0
        self.finish = math.inf
        self.lost_work = 0.0
        self.restarts = 0
        self.gang_losses = 0  # times a loss stopped the job (a gang of 16 losing 3 VMs at once: 1)
        self.cost = 0.0
        self.spot_seconds = self.od_seconds = 0.0
        if initial:  # the pool was created at its target: the primary's VMs boot as the job starts
            primary = plan.primary.name
            self.groups[primary].desired = plan.capacity.target
            self._changed(self.groups[primary])
            self._fill(self.groups[primary], start, quiet=True)

    def _changed(self, group: TwinGroup) -> None:
        """Every change to a group's VMs or request (after it): its observation and the cloud's next change are stale."""
        group.version += 1
        self._version += 1

    def _active(self) -> list[TwinGroup]:
        """The groups holding VMs or asking for them, in plan order: no other group can change or matter.

        Most of a pool's groups are idle most of the time (eight alternate zones wait for
        an episode), so the per-event loops walk only these.
        """
        seen = self._active_seen
        if seen[0] != self._version:
            seen = (self._version, [g for g in self._group_list if g.vms or g.desired > 0])
            self._active_seen = seen
        return seen[1]

    # --- capacity ----------------------------------------------------------
    def capacity(self, group: TwinGroup, t: float) -> int:
        if group.availability is None:
            return 10**6
        i = int((t + _EPS) // self.gap)
        return group.availability[i] if 0 <= i < len(group.availability) else 0

    def _launch(self, group: TwinGroup, t: float) -> None:
        self._seq += 1
        vm = TwinVm(f"{group.name}-{self._seq}", group.name, group.price, t, t + self.job.boot_seconds,
                    units=group.units, speed=group.speed)
        group.vms[vm.id] = vm
        self._changed(group)

    def _fill(self, group: TwinGroup, t: float, *, quiet: bool = False) -> None:
        """Launch toward desired as far as capacity and quota allow; a shortfall is a launch failure."""
        want = group.desired - len(group.vms)
        if want <= 0:
            return
        cap = self.capacity(group, t)
        group.last_cap = cap
        room = cap - len(group.vms)
        quota_room = math.inf if group.quota is None else group.quota - len(group.vms)
        n = int(max(0, min(want, room, quota_room)))
        for _ in range(n):
            self._launch(group, t)
        if n < want and not quiet:
            reason = FailureReason.QUOTA if quota_room < min(want, room) else FailureReason.CAPACITY
            code = "VcpuLimitExceeded" if reason is FailureReason.QUOTA else "InsufficientInstanceCapacity"
            self._failures.append(LaunchFailure(group.name, reason, code, t, f"{group.name}@{t:.3f}#{self._seq}"))
            self.failures_by_reason[reason.value] = self.failures_by_reason.get(reason.value, 0) + 1

    def _bill(self, vm: TwinVm, until: float) -> None:
        seconds = max(0.0, until - vm.launched_at)
        self.cost += seconds * vm.price / 3600.0
        if self.groups[vm.group].role is StepKind.ON_DEMAND:
            self.od_seconds += seconds
        else:
            self.spot_seconds += seconds

    def _remove(self, group: TwinGroup, vm: TwinVm, t: float) -> None:
        if vm.id in self.gang:
            self._gang_lost(t)  # first: the commits it made up to now are its agent's last reports
        del group.vms[vm.id]
        self._changed(group)
        if vm.report is not None:
            self._departed[vm.id] = vm.report  # its agent's report stays in the store
        self._bill(vm, t)

    # --- the job -------------------------------------------------------------
    def work_at(self, t: float) -> tuple[float, float]:
        """(committed work, work done) at time t of the current run."""
        if self.phase != "running":
            return self.committed, self.committed
        job, elapsed, speed = self.job, max(0.0, t - self.run_start), self.gang_speed
        cycle = job.interval_seconds + job.write_seconds
        k = int((elapsed + _EPS) // cycle)
        in_cycle = elapsed - k * cycle
        committed = min(self.base + k * job.interval_seconds * speed, job.work_seconds)
        done = min(committed + min(in_cycle, job.interval_seconds) * speed, job.work_seconds)
        return committed, done

    def _last_commit_time(self, t: float) -> float | None:
        if self.phase != "running":
            return None
        cycle = self.job.interval_seconds + self.job.write_seconds
        k = int((t - self.run_start + _EPS) // cycle)
        return self.run_start + k * cycle if k > 0 else None

    def _form_gang(self, t: float) -> None:
        if self.phase != "idle":
            return
        ready = [v for g in self._active() for v in g.vms.values() if v.ready_at <= t + _EPS and v.drain_at is None]
        if sum(v.units for v in ready) < self.job.nodes - _EPS:
            return
        # the cheapest work first: price per unit of GPUs and speed (the price alone when every type is alike)
        ready.sort(key=lambda v: (v.price / (v.units * v.speed), v.ready_at, v.id))
        gang, units = [], 0.0
        for v in ready:  # nodes until the gang has the primary's GPU count (twice the nodes of a half-size type)
            if units >= self.job.nodes - _EPS:
                break
            gang.append(v)
            units += v.units
        self.gang = tuple(v.id for v in gang)
        self.gang_speed = min(v.speed for v in gang)
        self.gangs.append(tuple(sorted(v.group for v in gang)))
        self.phase, self.phase_until = "loading", t + self.job.load_seconds
        self.restarts += 1

    def _start_run(self, t: float) -> None:
        self.phase, self.run_start, self.base = "running", t, self.committed
        left = (self.job.work_seconds - self.base) / self.gang_speed  # wall seconds of work at the gang's pace
        full = max(0, math.ceil(left / self.job.interval_seconds - _EPS) - 1)
        self.finish = t + full * (self.job.interval_seconds + self.job.write_seconds) + (left - full * self.job.interval_seconds)
        self.phase_until = self.finish

    def _settle_commits(self, t: float) -> None:
        """Record the run's commits up to t in the committed total and the gang's agent reports."""
        committed, _ = self.work_at(t)
        at = self._last_commit_time(t)
        if at is not None and committed > self.committed:
            self.committed = committed
            for vm in self._gang_vms():
                vm.report = (at, int(committed))

    def _gang_vms(self) -> list[TwinVm]:
        out = []
        for vm_id in self.gang:
            for g in self._active():
                if vm_id in g.vms:
                    out.append(g.vms[vm_id])
        return out

    def _gang_lost(self, t: float) -> None:
        if self.phase in ("running", "loading"):
            self.gang_losses += 1
        if self.phase == "running":
            self._settle_commits(t)
            _, done = self.work_at(t)
            self.lost_work += done - self.committed
        self.gang, self.phase, self.phase_until = (), "idle", math.inf
        self.finish = math.inf

    def _stop_for_drain(self, t: float) -> None:
        """The agent's final checkpoint: the work done by ``t`` is committed ``write_seconds`` later."""
        if self.phase == "running":
            self._settle_commits(t)
            _, done = self.work_at(t)
            self.committed = done
        self.phase, self.phase_until = "stopping", t + self.job.write_seconds
        self.finish = math.inf

    # --- time ------------------------------------------------------------------
    def _next_internal(self, after: float, *, phases: bool = True) -> float:
        """The next time the cloud or the job changes by itself (strictly after ``after``).

        ``phases=False`` leaves out the job's own transitions (load done, run done, final
        checkpoint written): none of them changes what the controller observes, except
        through the commits they lead to.
        """
        lo = after + _EPS
        best = self._next_group_change(after)
        if phases and lo < self.phase_until < best:
            best = self.phase_until
        return best

    def _next_group_change(self, after: float) -> float:
        """The next VM ready or trace change that can matter to a group holding VMs or asking for them."""
        seen = self._internal_seen
        if seen is not None and seen[0] == after and seen[1] == self._version:
            return seen[2]
        lo = after + _EPS
        best = math.inf
        gap = self.gap
        i = int(lo // gap)
        for g in self._active():
            vms = g.vms
            for v in vms.values():
                if lo < v.ready_at < best:
                    best = v.ready_at
            if g.desired > len(vms):
                nxt = g.next_change  # a request is open: any change of capacity retries it
            elif vms:
                nxt = g.next_below(len(vms))  # the request is met: only a drop below what is held matters
            else:
                continue  # nothing held or asked: neither a VM nor a trace change can matter
            if nxt is not None and 0 <= i < len(nxt):
                t = float(nxt[i]) * gap
                if lo < t < best:
                    best = t
        self._internal_seen = (after, self._version, best)
        return best

    def advance(self, t: float) -> None:
        """Process every change of the cloud and the job up to and including ``t``."""
        while self.phase != "done":
            e = self._next_internal(self.t)
            if e > t + _EPS:
                break
            self._at(e)
            self.t = e
        self.t = max(self.t, t)

    def _at(self, t: float) -> None:
        # 1. the job's own transitions
        if self.phase_until <= t + _EPS:
            if self.phase == "loading":
                self._start_run(t)
            elif self.phase == "running":  # finished
                self.committed = self.job.work_seconds
                self.phase, self.phase_until, self.finish = "done", math.inf, t
                return
            elif self.phase == "stopping":
                self.gang, self.phase, self.phase_until = (), "idle", math.inf
        # 2. capacity: take what the trace no longer allows, launch what it now allows
        for g in list(self._active()):  # a copy: taking a VM may change which groups are active
            cap = self.capacity(g, t)
            extra = len(g.vms) - cap
            if extra > 0:
                for vm in sorted(g.vms.values(), key=lambda v: (-v.launched_at, v.id))[:extra]:
                    self._interrupt(g, vm, t)
            if g.desired > len(g.vms):
                # the cloud retries an open request when capacity changed since its last attempt or a VM
                # was taken; still short is a failure
                self._fill(g, t, quiet=cap == g.last_cap and extra <= 0)
        # 3. a gang on new capacity
        self._form_gang(t)

    def _interrupt(self, group: TwinGroup, vm: TwinVm, t: float) -> None:
        self.interruptions += 1
        notice_at = t - self.notice_seconds
        fits = self.notice_seconds > 0 and self.job.write_seconds <= self.notice_seconds
        if fits and vm.id in self.gang and self.phase == "running" and notice_at >= self.run_start:
            self._settle_commits(notice_at)
            _, done = self.work_at(notice_at)
            self.committed = done  # the final checkpoint fit the notice
            self.gang_losses += 1
            for v in self._gang_vms():
                v.report = (notice_at + self.job.write_seconds, int(done))
            self.phase = "idle"
        self._events.append(Interruption(f"{vm.id}-int", vm.id, "interruption", max(notice_at, vm.launched_at)))
        self._remove(group, vm, t)

    # --- CloudAdapter ----------------------------------------------------------
    def observe(self, now: float) -> PoolObservation:
        if self.drain_store is not None:
            self._read_drains(now)
        self.advance(now)
        if self.phase == "running":
            self._settle_commits(now)
        groups = self._group_observations(now)
        live = {v.id: v.report for g in self._active() for v in g.vms.values() if v.report is not None}
        reports = {vm: r for vm, r in {**self._departed, **live}.items() if r[0] <= now + _EPS}
        self._departed = {}
        obs = PoolObservation(
            self.plan.name,
            now,
            groups,
            tuple(self._failures),
            tuple(self._events),
            {vm: r[0] for vm, r in reports.items()},
            {vm: r[1] for vm, r in reports.items() if r[1] is not None},
        )
        self._events, self._failures = [], []
        return obs

    def _group_observations(self, now: float) -> dict[str, GroupObservation]:
        """Every group's observation; reused whole while no group changed and no VM became ready.

        Every change bumps the cloud's version, so an unchanged version means no group
        changed; the copy keeps each tick's observation its own dict.
        """
        version = self._version
        seen = self._groups_seen
        if seen is not None and seen[0] == version and now + _EPS < seen[1]:
            return dict(seen[2])
        groups = {g.name: g.observation(now) for g in self._group_list}
        until = min((g.seen[1] for g in self._group_list if g.seen is not None), default=math.inf)
        self._groups_seen = (version, until, groups)
        return dict(groups)

    def _read_drains(self, now: float) -> None:
        """The agents' drain monitor: a request the controller wrote is acted on from its time."""
        assert self.drain_store is not None
        for g in self.groups.values():
            for vm in list(g.vms.values()):
                if vm.drain_at is not None:
                    continue
                doc = self.drain_store.get(f"drains/{self.plan.name}/{vm.id}.json")
                if doc and isinstance(doc.get("requestedAt"), int | float):
                    self.advance(float(doc["requestedAt"]))
                    self.request_drain(vm.id, float(doc["requestedAt"]))

    def apply(self, action: SetDesired | RemoveInstance, now: float | None = None) -> None:
        t = self.t if now is None else now
        group = self.groups[action.group]
        if isinstance(action, SetDesired):
            group.desired = action.desired
            self._changed(group)
            self._fill(group, t)
            return
        vm = group.vms[action.vm_id]
        self.removals.append(Removal(vm.id, group.name, t, vm.drain_at, vm.report[0] if vm.report else None))
        group.desired = max(0, group.desired - 1)
        self._remove(group, vm, t)
        self._fill(group, t, quiet=True)  # an open request takes the room at once (it already failed once)
        self._form_gang(t)

    def request_drain(self, vm_id: str, t: float) -> None:
        for g in self.groups.values():
            vm = g.vms.get(vm_id)
            if vm is None or vm.drain_at is not None:
                continue
            vm.drain_at = t
            if vm_id in self.gang and self.phase in ("running", "loading"):
                self._stop_for_drain(t)
                vm.report = (t + self.job.write_seconds, int(self.committed))  # its final checkpoint
            else:
                vm.report = (t + self.job.write_seconds, None)  # no work on it: the agent just acknowledges

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None

    def has_news(self) -> bool:
        """Events, or failures of groups whose backoff the planner acts on, waiting to be observed."""
        primary = self.plan.primary.name
        return bool(self._events) or any(f.group != primary for f in self._failures)

    def next_change(self, now: float, commits_matter: bool) -> float:
        """When the next observation could differ from this one (for the jump in :func:`run_twin`).

        The job's own transitions are left out unless commits matter: a transition changes
        nothing the controller sees but the commits (a finished job is found by the next
        observation, and the twin bills it to its finish time). That holds because a quiet
        retry never launches: every way room appears (a VM taken, a VM removed, a new
        request) is acted on at once.
        """
        e = self._next_internal(now, phases=commits_matter)
        for g in self._active():
            for v in g.vms.values():
                if v.report is not None and v.report[0] > now + _EPS:
                    e = min(e, v.report[0])
        if commits_matter and self.phase == "running":
            cycle = self.job.interval_seconds + self.job.write_seconds
            k = int((now - self.run_start + _EPS) // cycle) + 1
            e = min(e, self.run_start + k * cycle)
        return e

    def close(self, t: float) -> None:
        """Bill every VM still held up to ``t`` (the end of the job or of the replay)."""
        for g in self.groups.values():
            for vm in list(g.vms.values()):
                self._bill(vm, t)
                vm.launched_at = t


@dataclass
class TwinResult:
    start: float
    finish_seconds: float  # after the job's start; inf when it did not finish
    cost_usd: float  # billed capacity plus the deadline penalty
    met: bool
    spot_hours: float
    on_demand_hours: float
    lost_work_hours: float
    interruptions: int  # VMs taken by the cloud
    gang_losses: int  # times a loss stopped the job (what the baselines call preemptions)
    restarts: int
    ticks: int
    deferrals: int
    failures_by_reason: dict[str, int]
    steps_reached: set[str]
    removals: list[Removal]
    #: each gang the job formed, as its members' groups: a 4-GPU rung standing in for an 8-GPU primary shows twice the nodes
    gangs: list[tuple[str, ...]] = field(default_factory=list)


def run_twin(
    plan: PoolPlan,
    cloud: TwinCloud,
    *,
    horizon_seconds: float,
    jump: bool = True,
    on_tick: Callable[[float, PoolObservation, PoolState, TickResult], None] | None = None,
) -> TwinResult:
    """Drive the controller's planner against ``cloud`` until the job is done or the horizon passes."""
    start, tick = cloud.start, plan.tick_seconds
    end = start + horizon_seconds
    state = PoolState()
    ticks = deferrals = 0
    steps: set[str] = set()
    k = 0
    last = math.floor((end - start) / tick + 1e-9)  # the last tick within the horizon
    while True:
        now = start + k * tick
        if now > end or cloud.phase == "done":
            break
        obs = cloud.observe(now)
        if cloud.phase == "done":
            break
        result = reconcile(plan, obs, state)
        for action in result.actions:
            if isinstance(action, SetDesired | RemoveInstance):
                cloud.apply(action, now)
            elif isinstance(action, RequestDrain):
                cloud.request_drain(action.vm_id, now)
            elif isinstance(action, Defer):
                deferrals += 1
            elif isinstance(action, Resume):
                pass
        if result.step is not None:
            steps.add(result.step.kind.value)
        if on_tick is not None:
            on_tick(now, obs, state, result)
        ticks += 1
        if not jump or cloud.has_news():
            k += 1  # news (a launch failure, an interruption) is seen on the very next tick
            continue
        wake = min(next_wake(plan, state, now, result), cloud.next_change(now, commits_matter(plan, state, now, result)))
        # never past the last tick: a job that finished unseen (its end moves nothing) is found there
        at = math.ceil((wake - start) / tick - 1e-9) if math.isfinite(wake) else last
        k = max(k + 1, min(at, last))
    done_at = cloud.finish if cloud.phase == "done" else math.inf
    cloud.close(min(done_at, end) if math.isfinite(done_at) else end)
    job = cloud.job
    finish = done_at - start
    late_h = max(0.0, finish - job.deadline_seconds) / 3600.0 if math.isfinite(finish) else (end - start - job.deadline_seconds) / 3600.0
    return TwinResult(
        start=start,
        finish_seconds=finish,
        cost_usd=cloud.cost + max(0.0, late_h) * job.penalty_per_hour,
        met=finish <= job.deadline_seconds + 1e-6,
        spot_hours=cloud.spot_seconds / 3600.0,
        on_demand_hours=cloud.od_seconds / 3600.0,
        lost_work_hours=cloud.lost_work / 3600.0,
        interruptions=cloud.interruptions,
        gang_losses=cloud.gang_losses,
        restarts=cloud.restarts,
        ticks=ticks,
        deferrals=deferrals,
        failures_by_reason=dict(cloud.failures_by_reason),
        steps_reached=steps,
        removals=list(cloud.removals),
        gangs=list(cloud.gangs),
    )


def zone_groups(zones: Sequence[str], home: int, nodes: int) -> tuple[list[tuple[str, StepKind]], dict[str, int]]:
    """Group names and roles for a pool whose primary is zone ``home`` and whose alternates are the rest."""
    names = [(f"spot-{zones[home]}", StepKind.SAME_POOL)]
    names += [(f"spot-{z}", StepKind.ALTERNATE_ZONE) for i, z in enumerate(zones) if i != home]
    names.append(("on-demand", StepKind.ON_DEMAND))
    return names, {f"spot-{z}": i for i, z in enumerate(zones)}


def plan_for(
    workload: WorkloadProfile,
    ladder: FallbackLadder,
    groups: Sequence[tuple[str, StepKind] | GroupSpec],
    *,
    start: float,
    interval_seconds: float,
    policy: str = "ladder",
    tick_seconds: float = 60.0,
    stable_spot_seconds: float = 300.0,
) -> PoolPlan:
    """The PoolPlan the controller would build for this pool (as ``build_plans`` does from a config)."""
    specs = tuple(g if isinstance(g, GroupSpec) else GroupSpec(name=g[0], role=g[1]) for g in groups)
    nodes = workload.nodes
    # room for the widest gang shape: a 4-GPU group standing in for 8-GPU primaries needs twice the nodes
    reference = next(g for g in specs if g.role is StepKind.SAME_POOL).gpus_per_node or (
        workload.gpu.gpus_per_node if workload.gpu is not None else None) or 1
    widest = max((reference / (g.gpus_per_node or reference) for g in specs), default=1.0)
    return PoolPlan(
        name="twin",
        groups=specs,
        capacity=Capacity(target=nodes, max=max(nodes, math.ceil(nodes * widest - 1e-9))),
        workload=workload,
        strategy=make_strategy(policy, ladder),
        stable_spot_seconds=stable_spot_seconds,
        job_started_at=start if workload.deadline_hours is not None else None,
        total_steps=max(1, math.ceil(workload.work_hours * 3600.0)),
        checkpoint_interval_seconds=float(interval_seconds),
        tick_seconds=tick_seconds,
    )


def job_for(workload: WorkloadProfile, interval_seconds: float) -> TwinJob:
    deadline = workload.deadline_hours if workload.deadline_hours is not None else 2.0 * workload.work_hours
    return TwinJob(
        work_seconds=workload.work_hours * 3600.0,
        deadline_seconds=deadline * 3600.0,
        interval_seconds=float(interval_seconds),
        write_seconds=workload.checkpoint_write_seconds,
        boot_seconds=workload.restart_seconds,
        load_seconds=workload.checkpoint_load_seconds,
        nodes=workload.nodes,
        penalty_per_hour=workload.prices.deadline_penalty_per_hour,
    )
