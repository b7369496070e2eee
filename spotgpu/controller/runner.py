"""The reconcile loop: observe every pool, plan, act, save the record, then acknowledge events.

One :meth:`Controller.tick` is a complete, self-contained reconcile, so the same
code runs as a long-lived process (:meth:`Controller.run`) or as one tick per
invocation from a scheduled function (``spotgpu controller run --once``). Event
receipts (SQS messages, Pub/Sub acks) are acknowledged only after the record is
saved: a crash in between redelivers them, and the record's seen-keys make the
redelivery harmless.

A dry run (``dry_run=True``) observes for real and plans on a copy of the saved
record, then stops: no record, drain request, deferral marker or cloud call is
written, no event is acknowledged, and every event comes out as a ``would`` event.
A pool that cannot be observed (no credentials, endpoint unreachable, permission
denied) is listed in :attr:`Controller.unobserved` with one line saying why.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from spotgpu.contract.controller_events import (
    EVERY_POOL,
    ActionFailed,
    ActionTaken,
    Event,
    LeaseHeld,
    LeaseRefused,
    Would,
)
from spotgpu.contract.drain import DrainChannel, SchedulerHook, StoreSchedulerHook
from spotgpu.contract.state_store import JsonStore
from spotgpu.controller.actions import Action, Defer, RemoveInstance, RequestDrain, Resume, SetDesired
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.lease import FencedStore, Lease, LeaseGuardedAdapter, LeaseVerdict
from spotgpu.controller.observe import PoolObservation
from spotgpu.controller.reconcile import PoolPlan, TickResult, can_give_back, deadline, reconcile
from spotgpu.controller.state import Backoff, ControllerRecord, PoolState
from spotgpu.controller.strategies import make_strategy
from spotgpu.controller.telemetry import ControllerTelemetry
from spotgpu.economics.interval import choose_interval
from spotgpu.models.notice import default_notice

RECORD_KEY = "controller/record.json"


class CloudAdapter(Protocol):
    """One pool's view of its cloud. Adapters translate; they never decide."""

    def observe(self, now: float) -> PoolObservation: ...
    def apply(self, action: SetDesired | RemoveInstance) -> None: ...
    def ack(self, receipts: tuple[object, ...]) -> None: ...


def build_plans(config: ControllerConfig) -> dict[str, PoolPlan]:
    plans = {}
    for pool in config.pools:
        workload, ladder = config.workloads[pool.workload], config.ladders[pool.ladder]
        plans[pool.name] = PoolPlan(
            name=pool.name,
            groups=pool.groups,
            capacity=pool.capacity,
            workload=workload,
            strategy=make_strategy(workload.fallback_policy, ladder),
            stable_spot_seconds=config.stable_spot_seconds,
            job_started_at=pool.job_started_at,
            total_steps=pool.total_steps,
            checkpoint_interval_seconds=float(choose_interval(workload, default_notice(pool.cloud)).seconds),
            tick_seconds=config.tick_seconds,
            event_max_age_seconds=config.event_max_age_seconds,
        )
    return plans


def describe_observe_error(err: Exception) -> str:
    """One line for why a pool could not be observed: credentials, reachability, permission, or other."""
    name, text = type(err).__name__, str(err).splitlines()[0][:240] if str(err) else type(err).__name__
    code = ""
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        code = str(response.get("Error", {}).get("Code", ""))
    lowered = f"{name} {code} {text}".lower()
    if any(
        k in lowered for k in ("nocredentials", "credential", "defaultcredentialserror", "clientauthenticationerror")
    ):
        why = "no usable credentials"
    elif any(k in lowered for k in ("accessdenied", "unauthorized", "forbidden", "permission", "authorizationfailed")):
        why = "permission denied"
    elif any(k in lowered for k in ("endpointconnection", "connect", "timeout", "unreachable", "name resolution")):
        why = "endpoint unreachable"
    else:
        why = "observe failed"
    return f"{why} ({name}{': ' + code if code else ''}): {text}"


class Controller:
    def __init__(
        self,
        config: ControllerConfig,
        adapters: Mapping[str, CloudAdapter],
        store: JsonStore,
        telemetry: ControllerTelemetry | None = None,
        scheduler: SchedulerHook | None = None,
        *,
        dry_run: bool = False,
        lease: Lease | None = None,
    ) -> None:
        missing = [p.name for p in config.pools if p.name not in adapters]
        if missing:
            raise ValueError(f"no cloud adapter for pool(s) {missing}; build one per configured pool")
        # --- lease hook (one writer per record; see lease.py) ---
        self.lease = lease
        self.lease_verdict: LeaseVerdict | None = None
        if lease is not None:
            if store is not lease.store:
                raise ValueError("the lease must live in the controller's own store; pass the same store to both")
            store = self._fenced = FencedStore(lease.store, lease, (RECORD_KEY,))
            adapters = {name: LeaseGuardedAdapter(a, lease) for name, a in adapters.items()}
        # --- end lease hook ---
        self.config = config
        self.plans = build_plans(config)
        self.adapters = adapters
        self.store = store
        self.drains = DrainChannel(store)
        self.scheduler = scheduler or StoreSchedulerHook(store)
        self.telemetry = telemetry or ControllerTelemetry()
        self.dry_run = dry_run
        #: pool -> why it could not be observed on the last tick (one line each).
        self.unobserved: dict[str, str] = {}

    def load_record(self) -> ControllerRecord:
        doc = self.store.get(RECORD_KEY)
        return ControllerRecord() if doc is None else ControllerRecord.from_doc(doc)

    def _hold_lease(self, now: float) -> bool:
        """Lease hook: take or renew the lease before a tick; a refused tick does nothing and says why."""
        if self.lease is None:
            return True
        verdict = self.lease_verdict = self.lease.acquire()
        if not verdict.held:
            self._emit(Event.of(EVERY_POOL, now, LeaseRefused(reason=verdict.reason, token=verdict.token)))
            return False
        if verdict.reason != "renewed":
            self._fenced.fence()
        self._emit(Event.of(EVERY_POOL, now, LeaseHeld(token=verdict.token, how=verdict.reason)))
        return True

    def tick(self, now: float) -> dict[str, TickResult]:
        if not self._hold_lease(now):
            return {}
        record = self.load_record()
        results: dict[str, TickResult] = {}
        receipts: list[tuple[str, tuple[object, ...]]] = []
        self.unobserved = {}
        for name, plan in self.plans.items():
            state = record.pool(name)
            adapter = self.adapters[name]
            try:
                obs = adapter.observe(now)
            except Exception as err:  # one broken pool must not stop the others
                self.unobserved[name] = describe_observe_error(err)
                self._emit(Event.of(name, now, ActionFailed(action="observe", error=self.unobserved[name])))
                continue
            obs = with_known_zones(state, obs, plan.event_max_age_seconds)
            obs = self._with_reports(name, plan, state, obs)
            result = reconcile(plan, obs, state)
            for event in result.events:
                self._emit(event)
            if self.dry_run:
                for action in result.actions:
                    self._emit(Event.of(name, now, taken(action)))
            else:
                self._apply(name, plan, adapter, state, result.actions, now)
            if result.step is None and not self.dry_run:
                self.telemetry.pool_whole(name)
            status = deadline(plan, state, now) if plan.tracks_deadline and not self.dry_run else None
            if status is not None:
                self.telemetry.deadline(name, status.slack_hours * 3600.0, not can_give_back(plan, state, now))
            results[name] = result
            receipts.append((name, obs.receipts))
        if self.dry_run:
            return results  # nothing saved, nothing acknowledged
        self.store.put(RECORD_KEY, record.to_doc())
        for name, pool_receipts in receipts:
            if pool_receipts:
                self.adapters[name].ack(pool_receipts)
        return results

    def _with_reports(self, name: str, plan: PoolPlan, state: PoolState, obs: PoolObservation) -> PoolObservation:
        """Add the agents' commit reports: every VM's when the pool tracks a deadline, else drained ones."""
        vm_ids = sorted(v.id for g in obs.groups.values() for v in g.vms)
        # with a deadline: every VM's progress, and the last tick's VMs too (a VM that committed, then was lost)
        wanted = sorted({*vm_ids, *state.members}) if plan.tracks_deadline else [v for v in vm_ids if v in state.drains]
        reports = self.drains.reports(name, wanted)
        commits = {**{vm: at for vm, (at, _) in reports.items()}, **obs.commits}
        steps = {**{vm: step for vm, (_, step) in reports.items() if step is not None}, **obs.steps}
        return dataclasses.replace(obs, commits=commits, steps=steps)

    def _apply(
        self,
        pool: str,
        plan: PoolPlan,
        adapter: CloudAdapter,
        state: PoolState,
        actions: tuple[Action, ...],
        now: float,
    ) -> None:
        for action in actions:
            kind = type(action).__name__
            try:
                if isinstance(action, SetDesired | RemoveInstance):
                    adapter.apply(action)
                elif isinstance(action, RequestDrain):
                    self.drains.request(pool, action.vm_id, now)
                elif isinstance(action, Defer):
                    self.scheduler.defer(pool, action.reason, now)
                elif isinstance(action, Resume):
                    self.scheduler.resume(pool, now)
            except Exception as err:
                self._emit(Event.of(pool, now, ActionFailed(action=kind, error=str(err)[:300])))
                if isinstance(action, SetDesired):
                    state.backoff.setdefault(action.group, Backoff()).fail(now, action.desired)
                elif isinstance(action, RemoveInstance):
                    state.drains[action.vm_id] = 0.0  # committed already; retry removal next tick
                continue
            self._emit(Event.of(pool, now, taken(action)))

    def _emit(self, event: Event) -> None:
        if self.dry_run:  # only "would" telemetry: no counter moves, nothing looks like it happened
            event = Event.of(event.pool, event.at, Would(event=event.kind, detail=event.data))
        self.telemetry.emit(event)

    def run(self, stop: threading.Event | None = None, clock: Callable[[], float] = time.time) -> None:
        """Tick every ``tick_seconds`` until ``stop`` is set; a failed tick is logged, not fatal."""
        stop = stop or threading.Event()
        while not stop.is_set():
            started = clock()
            try:
                self.tick(started)
            except Exception as err:
                self._emit(Event.of(EVERY_POOL, started, ActionFailed(action="tick", error=str(err)[:300])))
            stop.wait(max(0.0, self.config.tick_seconds - (clock() - started)))


def with_known_zones(state: PoolState, obs: PoolObservation, max_age: float) -> PoolObservation:
    """Note the zone of every listed VM in the record, and give an interruption that names no zone the
    zone its VM was last listed in.

    An Azure eviction (Event Grid carries only a location) names a VM the Delete policy has already
    removed from the list, so only an earlier tick knew its zone; the fitted interruption rates and
    the twin are per zone. A VM never listed (or gone longer than ``max_age``) keeps "".
    """
    state.note_zones(((v.id, v.zone) for g in obs.groups.values() for v in g.vms), obs.now, max_age)
    if all(i.zone for i in obs.interruptions):
        return obs
    filled = tuple(i if i.zone else dataclasses.replace(i, zone=state.zone_of(i.vm_id)) for i in obs.interruptions)
    return dataclasses.replace(obs, interruptions=filled)


def taken(action: Action) -> ActionTaken:
    """The event of an action carried out: its class name and its own fields."""
    return ActionTaken(action=type(action).__name__, detail=dataclasses.asdict(action))
