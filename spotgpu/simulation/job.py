"""The simulated job and its node agents: a gang that loads, commits, loses work and drains.

The job never sees the controller. Like the real one, it learns what the cloud does to
its VMs (a VM lost, a notice) from the cloud, and it talks to the controller only
through the agents' channel (:class:`AgentChannel`): drain requests come in, commit
reports go out (``drains/<pool>/<vm>.json`` and ``agents/<pool>/<vm>.json`` in the
pool's store; here in memory, or on a real store when the twin is given one).

Mechanics (:class:`TwinJob`, seconds): when the pool holds ``nodes`` primary nodes'
worth of GPUs in ready VMs that are not draining, the job forms a gang on the cheapest
work (price per GPU and per unit of speed: a 4-GPU type standing in for an 8-GPU primary
gives twice the nodes) and steps at its slowest member's speed (``gpu.relativeThroughput``);
it loads the checkpoint (``load_seconds``), then commits every interval of work
(``interval_seconds`` of work, ``write_seconds`` to write); each gang VM's agent reports
each commit (time and step, one step = one second of work). Losing a gang VM loses the
work since the last commit. A drain request makes the agent write a final checkpoint
and report it ``write_seconds`` later.

With checkpoint tiers (:class:`TwinTiers`, ``spotgpu.economics.tiers``) each commit is a local
one (``write_seconds`` the local write), every ``durable_every``-th reaches the object store
``upload_seconds`` later, and each gang VM's shard has copies on ``peer_copies`` other gang
VMs (the checkpoint library's ring over the gang, alternating its VMs' zones:
:func:`spotgpu.economics.placement.holders`), chosen as the library chooses them: when a gang forms,
from its VMs' current zones, and holding the copies of that gang's own commits (the step a gang
restored stays where it was until it commits). Every VM that goes (taken,
removed) takes its tier with it. When the next gang forms, it resumes from the newest local
commit if every shard of it is still held by a member of the new gang (a member's own tier:
``local``; a copy another member holds: ``peer``), else from the newest durable one (the
newcomers read the ``store``; members that held the old gang's tiers still read their own,
which keeps the newest durable generation), and loads in the tier's or the store's time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from spotgpu.contract.drain import DrainChannel
from spotgpu.economics.placement import holders

_EPS = 1e-9

#: An agent's last commit report: (time, step; None when the VM held no work).
Report = tuple[float, int | None]


@dataclass(frozen=True)
class TwinTiers:
    """A tiered job's mechanics (seconds): see the module docstring."""

    durable_every: int
    upload_seconds: float
    tier_load_seconds: float
    peer_copies: int


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
    tiers: TwinTiers | None = None

    @property
    def total_steps(self) -> int:
        return max(1, math.ceil(self.work_seconds))


class GangNode(Protocol):
    """What the job needs of a VM it may run on (the cloud's VM)."""

    id: str
    group: str
    price: float
    units: float
    speed: float
    ready_at: float
    zone: str


@dataclass
class AgentChannel:
    """The agents' side of the drain channel: commit reports out, drain requests in.

    ``reports`` holds each VM's last report as the controller would read it; a VM that
    left is read once more (its agent's file stays in the store), then forgotten. With a
    ``store``, drain requests are read where a real controller writes them.
    """

    pool: str
    store: DrainChannel | None = None
    reports: dict[str, Report] = field(default_factory=dict)
    departed: dict[str, Report] = field(default_factory=dict)

    def report(self, vm_id: str, at: float, step: int | None) -> None:
        self.reports[vm_id] = (at, step)

    def depart(self, vm_id: str) -> None:
        report = self.reports.pop(vm_id, None)
        if report is not None:
            self.departed[vm_id] = report

    def read(self, live: Iterable[str], now: float) -> dict[str, Report]:
        """The reports the controller reads at ``now`` (those of VMs that left since the last read, then live ones)."""
        reports, departed = self.reports, self.departed
        if not reports and not departed:
            return {}
        seen = {vm: reports[vm] for vm in live if vm in reports}
        if departed:
            seen = {**departed, **seen}
            self.departed = {}
        return {vm: r for vm, r in seen.items() if r[0] <= now + _EPS}

    def requested_at(self, vm_id: str) -> float | None:
        """A drain request the controller wrote for ``vm_id`` (only with a store)."""
        return None if self.store is None else self.store.requested_at(self.pool, vm_id)


class JobRun:
    """One job's progress through gangs, commits, losses and drains."""

    def __init__(self, job: TwinJob, channel: AgentChannel) -> None:
        self.job, self.channel = job, channel
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
        # checkpoint tiers (job.tiers): the live VMs holding each shard of the committed step (by the VM
        # that wrote it), the newest durable commit, and the rank restores from each source
        self.holders: dict[str, set[str]] = {}
        #: the current gang's partners (:func:`holders` over its VMs' zones): they hold the copies of its own
        #: commits only; the step it restored stays where ``holders`` says until its first commit
        self.ring: dict[str, set[str]] = {}
        self.restored = 0.0  # the committed work the current gang restored (its commits are the ones above it)
        self.durable = 0.0
        self.restores = {"local": 0, "peer": 0, "store": 0}
        #: the part of ``restores`` made by gangs formed after a drain (the controller moved the job, and its final
        #: checkpoint went to the store), not after an interruption: what the cost model's mix leaves out
        self.moved_restores = {"local": 0, "peer": 0, "store": 0}
        self.moved = False  # the gang last stopped for a drain, not an interruption
        self.idle_since: float | None = None  # when the job last stopped with no gang (None: a gang holds it)
        self.idle_seconds = 0.0  # wall time with no gang (what the baselines' idle hours count)

    # --- progress ----------------------------------------------------------------
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

    def next_commit(self, now: float) -> float:
        """The next periodic commit after ``now`` (inf unless running)."""
        if self.phase != "running":
            return math.inf
        cycle = self.job.interval_seconds + self.job.write_seconds
        k = int((now - self.run_start + _EPS) // cycle) + 1
        return self.run_start + k * cycle

    def settle_commits(self, t: float) -> None:
        """Record the run's commits up to t in the committed total and the gang's agent reports."""
        committed, _ = self.work_at(t)
        at = self._last_commit_time(t)
        if at is not None and committed > self.committed:
            self.committed = committed
            for vm_id in self.gang:
                self.channel.report(vm_id, at, int(committed))

    def start_idle(self, t: float) -> None:
        """The job stands with no gang from ``t`` (its start, a loss, a stop): wall time billed as idle job-hours."""
        if self.idle_since is None:
            self.idle_since = t

    def _end_idle(self, t: float) -> None:
        if self.idle_since is not None:
            self.idle_seconds += max(0.0, t - self.idle_since)
            self.idle_since = None

    def idle_hours(self, until: float) -> float:
        """Hours the job stood with no gang, up to ``until`` (the end of the run or of the replay)."""
        open_idle = max(0.0, until - self.idle_since) if self.idle_since is not None and self.phase != "done" else 0.0
        return (self.idle_seconds + open_idle) / 3600.0

    # --- what happens to it ------------------------------------------------------
    def form_gang(self, ready: Sequence[GangNode], t: float) -> None:
        """Start a gang on ``ready`` (ready VMs that are not draining) once they hold the job's GPUs."""
        if self.phase != "idle" or sum(v.units for v in ready) < self.job.nodes - _EPS:
            return
        # the cheapest work first: price per unit of GPUs and speed (the price alone when every type is alike)
        gang: list[GangNode] = []
        units = 0.0
        for v in sorted(ready, key=lambda v: (v.price / (v.units * v.speed), v.ready_at, v.id)):  # nodes until the gang has the primary's GPU count (twice the nodes of a half-size type)
            if units >= self.job.nodes - _EPS:
                break
            gang.append(v)
            units += v.units
        self._end_idle(t)
        self.gang = tuple(v.id for v in gang)
        self.gang_speed = min(v.speed for v in gang)
        self.gangs.append(tuple(sorted(v.group for v in gang)))
        load = self.job.load_seconds if self.job.tiers is None else self._tier_restore(gang)
        self.phase, self.phase_until = "loading", t + load
        self.restarts += 1

    def _tier_restore(self, gang: Sequence[GangNode]) -> float:
        """Tiers: the step the new gang resumes from, where each rank reads it, who holds it afterwards;
        the gang's load seconds (the store's when any rank reads the store).

        As in the library, partners are chosen when a gang forms (each incarnation's manager, from its
        ranks' current zones: ``TieredCheckpointManager.__init__``), and copies follow them from its first
        commit on. Until then the step it restored is held where it was, plus by each rank that read its
        shard from a peer (it keeps the copy it received); a rank that read the store holds nothing new.
        """
        tiers = self.job.tiers
        assert tiers is not None
        members = {v.id for v in gang}
        current = self.ring if self.committed > self.restored + _EPS else self.holders
        sources: list[str] = []
        owners: dict[str, str] = {}  # the gang member that reads each shard -> the shard (its writer)
        if self.committed > 0:
            held = set().union(*current.values()) & members if current else set()
            # survivors read their own shard, newcomers those whose writer left (a wider gang: some read none)
            newcomers = sorted(v.id for v in gang if v.id not in current)
            orphans = sorted(s for s in current if s not in members)
            owners = {s: s for s in current if s in members} | dict(zip(newcomers, orphans, strict=False))
            if current and all(hs & members for hs in current.values()):
                sources = ["local" if v.id in current.get(owners.get(v.id, ""), ()) else "peer" for v in gang]
                restored = {owner: (current[s] | {owner}) for owner, s in owners.items()}
            else:  # a shard of the newest local step is gone with its copies: back to the newest durable one
                self.lost_work += self.committed - self.durable
                self.committed = self.durable
                sources = ["local" if v.id in held else "store" for v in gang] if self.durable > 0 else []
                # survivors keep the durable generation in their tiers; a rank that read the store holds none
                restored = {owner: ({owner} if owner in held else set()) for owner in owners}
            for source in sources:
                self.restores[source] += 1
                if self.moved:
                    self.moved_restores[source] += 1
            self.holders = restored
        self.restored = self.committed
        self.ring = holders([(v.id, v.zone) for v in gang], tiers.peer_copies)
        if self.committed <= 0:
            self.holders = {}
        return tiers.tier_load_seconds if sources and "store" not in sources else self.job.load_seconds

    def vm_gone(self, vm_id: str) -> None:
        """Tiers: a VM left (taken or removed), and its local tier with it."""
        for held in (*self.holders.values(), *self.ring.values()):
            held.discard(vm_id)

    def step(self, t: float) -> bool:
        """The job's own transition due at ``t`` (load done, run done, final checkpoint written);
        True when the job finished."""
        if self.phase_until > t + _EPS:
            return False
        if self.phase == "loading":
            self._start_run(t)
        elif self.phase == "running":  # finished
            self.committed = self.job.work_seconds
            self.phase, self.phase_until, self.finish = "done", math.inf, t
            return True
        elif self.phase == "stopping":
            self.gang, self.phase, self.phase_until = (), "idle", math.inf
            self.start_idle(t)
        return False

    def _start_run(self, t: float) -> None:
        self.phase, self.run_start, self.base = "running", t, self.committed
        left = (self.job.work_seconds - self.base) / self.gang_speed  # wall seconds of work at the gang's pace
        full = max(0, math.ceil(left / self.job.interval_seconds - _EPS) - 1)
        self.finish = t + full * (self.job.interval_seconds + self.job.write_seconds) + (left - full * self.job.interval_seconds)
        self.phase_until = self.finish

    def durable_at(self, t: float) -> float:
        """Tiers: the newest work in the object store at ``t`` (every ``durable_every``-th local commit of
        the run, ``upload_seconds`` after it)."""
        tiers = self.job.tiers
        if tiers is None or self.phase != "running":
            return self.durable
        cycle = self.job.interval_seconds + self.job.write_seconds
        k = int((t - self.run_start - tiers.upload_seconds + _EPS) // cycle)
        k -= k % tiers.durable_every
        if k <= 0:
            return self.durable
        return max(self.durable, min(self.base + k * self.job.interval_seconds * self.gang_speed, self.job.work_seconds))

    def lost(self, t: float) -> None:
        """A gang VM is gone: the work since the last commit is lost, the gang stops."""
        if self.phase in ("running", "loading"):
            self.gang_losses += 1
            self.moved = False
        if self.phase == "running":
            self.settle_commits(t)
            _, done = self.work_at(t)
            self.durable = self.durable_at(t)
            self.lost_work += done - self.committed
        self.start_idle(t)
        self.gang, self.phase, self.phase_until = (), "idle", math.inf
        self.finish = math.inf

    def noticed(self, notice_at: float) -> bool:
        """A gang VM's interruption notice at ``notice_at`` with a final checkpoint that fits it: the work done
        by then is committed and reported; True when it applied (the gang then stops)."""
        if self.phase != "running" or notice_at < self.run_start:
            return False
        self.settle_commits(notice_at)
        _, done = self.work_at(notice_at)
        self.durable = self.durable_at(notice_at)
        self.committed = done  # the final checkpoint fit the notice (with tiers: on the local tier and the peers)
        self.gang_losses += 1
        self.moved = False
        for vm_id in self.gang:
            self.channel.report(vm_id, notice_at + self.job.write_seconds, int(done))
        self.phase = "idle"
        self.start_idle(notice_at)
        return True

    def drained(self, vm_id: str, t: float) -> None:
        """The agent on ``vm_id`` read a drain request at ``t``: a gang member stops the job and writes a final
        checkpoint; any other VM just acknowledges. Either way its report follows ``write_seconds`` later."""
        if vm_id in self.gang and self.phase in ("running", "loading"):
            self.moved = True
            if self.phase == "running":
                self.settle_commits(t)
                _, done = self.work_at(t)
                self.committed = done
                self.durable = done  # a drain's budget (minutes) carries the final checkpoint to the store too
            self.phase, self.phase_until = "stopping", t + self.job.write_seconds
            self.finish = math.inf
            self.channel.report(vm_id, t + self.job.write_seconds, int(self.committed))  # its final checkpoint
        else:
            self.channel.report(vm_id, t + self.job.write_seconds, None)  # no work on it: the agent just acknowledges
