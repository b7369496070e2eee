"""The simulated cloud: one pool's groups, driven by availability traces (a ``CloudAdapter``).

* one group per trace (``data[i]`` VMs can be held during tick ``i``) plus an
  unlimited on-demand group; or a *regional* group given one trace per zone (a GCP
  regional MIG, an AWS Auto Scaling group over several zones' subnets, an Azure zonal
  scale set), which launches each VM where a zone has room, the zone holding the fewest
  of its VMs first (:func:`~spotgpu.economics.placement.next_zone`), so a gang spreads
  over the zones and a zone's reclaim takes that zone's VMs only; VMs above what a
  zone's trace allows are interrupted, newest first, and an :class:`Interruption` event is delivered (optionally a
  notice ``notice_seconds`` earlier, in which the agent writes a final checkpoint
  when it fits);
* a launch asks the group; what the trace (or a group's ``quota``) cannot give
  fails with a capacity (or quota) :class:`LaunchFailure`, and the cloud keeps
  trying the open request whenever capacity appears, as ASGs, MIGs and scale sets do;
* a VM is ready ``boot_seconds`` after its launch and billed from launch to removal
  or loss, at its group's price, while the job runs.

The job (:class:`~spotgpu.simulation.job.JobRun`) runs on the cloud's VMs: the cloud
tells it when a gang VM is lost or noticed, and what the controller observes of the
job comes through the agents' channel (commit reports), as on a real pool. The cloud
keeps the time: :meth:`TwinCloud.advance` processes the cloud's and the job's changes in
order, and :meth:`TwinCloud.next_change` says when the next observation could differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np

from spotgpu.contract.drain import DrainChannel
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.state_store import JsonStore
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.observe import (
    FailureReason,
    GroupObservation,
    Interruption,
    LaunchFailure,
    PoolObservation,
    Vm,
)
from spotgpu.controller.reconcile import PoolPlan
from spotgpu.economics.placement import spread
from spotgpu.models.ladder import StepKind
from spotgpu.simulation.job import AgentChannel, JobRun, TwinJob

_EPS = 1e-9


@dataclass
class TwinVm:
    id: str
    group: str
    price: float
    launched_at: float
    ready_at: float
    drain_at: float | None = None
    units: float = 1.0  # primary nodes' worth of GPUs (a 4-GPU node standing in for 8-GPU ones: 0.5)
    speed: float = 1.0  # its GPUs' work per hour against the reference type (gpu.relativeThroughput)
    zone: str = ""  # where it runs: its zone in a regional group, else its group's name (a group is one zone)


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
    #: a regional group: zone -> (VMs the zone's trace allows per tick, next change, the trace), in the
    #: group's zone order (its first zone first); None: a group in one zone
    zones: dict[str, tuple[list[int], list[int], np.ndarray]] | None = None

    def held_in(self, zone: str) -> int:
        return sum(1 for v in self.vms.values() if v.zone == zone)

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
    """One pool's simulated cloud and the job on it; implements the controller's CloudAdapter protocol."""

    def __init__(
        self,
        plan: PoolPlan,
        job: TwinJob,
        traces: Mapping[str, np.ndarray | Mapping[str, np.ndarray]],
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
        #: (``drains/<pool>/<vm>.json``).
        self.channel = AgentChannel(plan.name, DrainChannel(drain_store) if drain_store is not None else None)
        self.run = JobRun(job, self.channel)
        self.run.start_idle(start)  # no gang until the first one forms
        self.groups: dict[str, TwinGroup] = {}
        for g in plan.groups:
            given = traces.get(g.name)
            if given is None and g.role is not StepKind.ON_DEMAND:
                raise ValueError(f"group {g.name} has no trace; give one per spot group (a regional one: one per zone)")
            zones = None
            if isinstance(given, Mapping):  # a regional group: one trace per zone
                zones = {z: (*_trace_lists_cached(a), a) for z, a in given.items()}
                given = None
            avail = given
            lists = None if avail is None else _trace_lists_cached(avail)
            self.groups[g.name] = TwinGroup(
                g.name, g.role, plan.price(g), None if lists is None else lists[0], None if lists is None else lists[1],
                (quota or {}).get(g.name),
                trace=avail,
                units=plan.units(g.name),
                speed=plan.speed(g.name),
                zones=zones,
            )
        self.t = start
        self._seq = 0
        self._events: list[Interruption] = []
        self._failures: list[LaunchFailure] = []
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
        if group.zones is not None:
            return sum(self.zone_capacity(group, z, t) for z in group.zones)
        if group.availability is None:
            return 10**6
        i = int((t + _EPS) // self.gap)
        return group.availability[i] if 0 <= i < len(group.availability) else 0

    def zone_capacity(self, group: TwinGroup, zone: str, t: float) -> int:
        """VMs a regional group's ``zone`` allows at ``t``."""
        assert group.zones is not None
        avail = group.zones[zone][0]
        i = int((t + _EPS) // self.gap)
        return avail[i] if 0 <= i < len(avail) else 0

    def _launch(self, group: TwinGroup, t: float, zone: str | None = None) -> None:
        self._seq += 1
        vm = TwinVm(f"{group.name}-{self._seq}", group.name, group.price, t, t + self.job.boot_seconds,
                    units=group.units, speed=group.speed, zone=zone or group.name)
        group.vms[vm.id] = vm
        self._changed(group)

    def _launch_regional(self, group: TwinGroup, n: int, t: float) -> None:
        """``n`` launches of a regional group, each where :func:`spread` puts it."""
        assert group.zones is not None
        zones = list(group.zones)
        held = {z: group.held_in(z) for z in zones}
        room = {z: self.zone_capacity(group, z, t) - held[z] for z in zones}
        placed = spread(n, zones, room, held)
        assert len(placed) == n  # n is within the group's total room
        for zone in placed:
            self._launch(group, t, zone)

    def _fill(self, group: TwinGroup, t: float, *, quiet: bool = False) -> None:
        """Launch toward desired as far as capacity and quota allow; a shortfall is a launch failure."""
        want = group.desired - len(group.vms)
        if want <= 0:
            return
        cap = self.capacity(group, t)
        group.last_cap = cap
        room = cap - len(group.vms)
        quota_room = math.inf if group.quota is None else group.quota - len(group.vms)
        if group.zones is not None:  # only the zones' own room: a zone over its trace has none to give
            room = sum(max(0, self.zone_capacity(group, z, t) - group.held_in(z)) for z in group.zones)
        n = int(max(0, min(want, room, quota_room)))
        if group.zones is not None:
            self._launch_regional(group, n, t)
        else:
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
        if vm.id in self.run.gang:
            self.run.lost(t)  # first: the commits it made up to now are its agent's last reports
        del group.vms[vm.id]
        if self.job.tiers is not None:
            self.run.vm_gone(vm.id)  # its local checkpoint tier goes with it
        self._changed(group)
        self.channel.depart(vm.id)  # its agent's report stays in the store, read once more
        self._bill(vm, t)

    def _form_gang(self, t: float) -> None:
        if self.run.phase != "idle":
            return
        ready = [v for g in self._active() for v in g.vms.values() if v.ready_at <= t + _EPS and v.drain_at is None]
        self.run.form_gang(ready, t)

    # --- time ------------------------------------------------------------------
    def _next_internal(self, after: float, *, phases: bool = True) -> float:
        """The next time the cloud or the job changes by itself (strictly after ``after``).

        ``phases=False`` leaves out the job's own transitions (load done, run done, final
        checkpoint written): none of them changes what the controller observes, except
        through the commits they lead to.
        """
        lo = after + _EPS
        best = self._next_group_change(after)
        until = self.run.phase_until
        if phases and lo < until < best:
            best = until
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
            if g.zones is not None:
                for zone, (_, changes, trace) in g.zones.items():
                    held = sum(1 for v in vms.values() if v.zone == zone)
                    if g.desired > len(vms):
                        zn: list[int] = changes  # a request is open: any zone's change retries it
                    elif held:
                        zn = _next_below_cached(trace, held)  # met: only a drop below what the zone holds
                    else:
                        continue
                    if 0 <= i < len(zn):
                        t = float(zn[i]) * gap
                        if lo < t < best:
                            best = t
                continue
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
        while self.run.phase != "done":
            e = self._next_internal(self.t)
            if e > t + _EPS:
                break
            self._at(e)
            self.t = e
        self.t = max(self.t, t)

    def _at(self, t: float) -> None:
        # 1. the job's own transitions
        if self.run.step(t):
            return  # finished
        # 2. capacity: take what the trace no longer allows, launch what it now allows
        for g in list(self._active()):  # a copy: taking a VM may change which groups are active
            cap = self.capacity(g, t)
            extra = 0
            for zone, over in self._over(g, t).items():  # a zone takes its own VMs only, newest first
                if over > 0:
                    extra += over
                    in_zone = [v for v in g.vms.values() if v.zone == zone]
                    for vm in sorted(in_zone, key=lambda v: (-v.launched_at, v.id))[:over]:
                        self._interrupt(g, vm, t)
            if g.desired > len(g.vms):
                # the cloud retries an open request when capacity changed since its last attempt or a VM
                # was taken; still short is a failure
                self._fill(g, t, quiet=cap == g.last_cap and extra <= 0)
        # 3. a gang on new capacity
        self._form_gang(t)

    def _over(self, group: TwinGroup, t: float) -> dict[str, int]:
        """Per zone, the VMs held beyond what its trace allows at ``t`` (a group in one zone: its own
        trace, its VMs' zone being the group's name)."""
        if group.zones is None:
            return {group.name: len(group.vms) - self.capacity(group, t)}
        return {z: group.held_in(z) - self.zone_capacity(group, z, t) for z in group.zones}

    def _interrupt(self, group: TwinGroup, vm: TwinVm, t: float) -> None:
        self.interruptions += 1
        notice_at = t - self.notice_seconds
        fits = self.notice_seconds > 0 and self.job.write_seconds <= self.notice_seconds
        if fits and vm.id in self.run.gang:
            self.run.noticed(notice_at)
        self._events.append(Interruption(f"{vm.id}-int", vm.id, InterruptionKind.INTERRUPTION, max(notice_at, vm.launched_at)))
        self._remove(group, vm, t)

    # --- CloudAdapter ----------------------------------------------------------
    def observe(self, now: float) -> PoolObservation:
        if self.channel.store is not None:
            self._read_drains(now)
        self.advance(now)
        if self.run.phase == "running":
            self.run.settle_commits(now)
        groups = self._group_observations(now)
        reports = self.channel.read((v.id for g in self._active() for v in g.vms.values()), now)
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
        for g in self.groups.values():
            for vm in list(g.vms.values()):
                if vm.drain_at is not None:
                    continue
                at = self.channel.requested_at(vm.id)
                if at is not None:
                    self.advance(at)
                    self.request_drain(vm.id, at)

    def apply(self, action: SetDesired | RemoveInstance, now: float | None = None) -> None:
        t = self.t if now is None else now
        group = self.groups[action.group]
        if isinstance(action, SetDesired):
            group.desired = action.desired
            self._changed(group)
            self._fill(group, t)
            return
        vm = group.vms[action.vm_id]
        report = self.channel.reports.get(vm.id)
        self.removals.append(Removal(vm.id, group.name, t, vm.drain_at, report[0] if report else None))
        group.desired = max(0, group.desired - 1)
        self._remove(group, vm, t)
        self._fill(group, t, quiet=True)  # an open request takes the room at once (it already failed once)
        self._form_gang(t)

    def request_drain(self, vm_id: str, t: float) -> None:
        """The agent on ``vm_id`` gets the controller's drain request at ``t`` and tells the job."""
        for g in self.groups.values():
            vm = g.vms.get(vm_id)
            if vm is None or vm.drain_at is not None:
                continue
            vm.drain_at = t
            self.run.drained(vm_id, t)

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None

    def has_news(self) -> bool:
        """Events, or failures of groups whose backoff the planner acts on, waiting to be observed."""
        primary = self.plan.primary.name
        return bool(self._events) or any(f.group != primary for f in self._failures)

    def next_change(self, now: float, commits_matter: bool) -> float:
        """When the next observation could differ from this one (for the jump in ``run_twin``).

        The job's own transitions are left out unless commits matter: a transition changes
        nothing the controller sees but the commits (a finished job is found by the next
        observation, and the twin bills it to its finish time). That holds because a quiet
        retry never launches: every way room appears (a VM taken, a VM removed, a new
        request) is acted on at once.
        """
        e = self._next_internal(now, phases=commits_matter)
        for at, _ in self.channel.reports.values():
            if now + _EPS < at < e:
                e = at
        if commits_matter:
            e = min(e, self.run.next_commit(now))
        return e

    def close(self, t: float) -> None:
        """Bill every VM still held up to ``t`` (the end of the job or of the replay)."""
        for g in self.groups.values():
            for vm in list(g.vms.values()):
                self._bill(vm, t)
                vm.launched_at = t
