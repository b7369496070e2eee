"""``spotgpu drill gcp``: preempt one running VM of a pool and time its replacement.

Steps: find the pool's spot MIGs (by the ``spotgpu-pool``/``spotgpu-role`` labels
every managed VM carries, else by the ``<pool>-<env>-spot-<key>`` name
convention), pick one RUNNING VM with no pending action, call
``instances.simulateMaintenanceEvent`` on it (Google's documented way to test how
Spot VMs handle preemption), then poll ``listManagedInstances`` until that VM has
left RUNNING and a replacement (a new VM, or the same VM restarted when the
termination action is STOP) is RUNNING. The timeline is printed as it happens;
the last line is the reacquisition latency. ``--dry-run`` does every read (MIGs, managed
instances, the VM it would pick) and stops before ``simulateMaintenanceEvent``.

Clients, clock and sleep are injected so the whole flow is tested offline.
"""

from __future__ import annotations

import argparse
import re
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from spotgpu.contract import tags
from spotgpu.drills.common import DrillError, DrillFailed, DrillOutput, Outcome, add_drill_flags, finish, raising

#: Consecutive failed polls after which the drill gives up (one blip is tolerated).
MAX_POLL_FAILURES = 3


class DrillTimeout(DrillFailed):
    """The VM was not replaced in time (the timeline so far is still printed)."""


__all__ = ["DrillError", "DrillFailed", "DrillTimeout", "run_drill"]


class MigClient(Protocol):
    def list(self, *, project: str, region: str) -> Iterable[Any]: ...

    def list_managed_instances(self, *, project: str, region: str, instance_group_manager: str) -> Iterable[Any]: ...


class InstanceClient(Protocol):
    def simulate_maintenance_event(self, *, project: str, zone: str, instance: str) -> Any: ...


@dataclass
class GcpClients:
    migs: MigClient
    instances: InstanceClient


def default_clients() -> GcpClients:  # pragma: no cover - needs Google credentials
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # google.api_core's Python-version notice
        from google.cloud import compute_v1

    return GcpClients(compute_v1.RegionInstanceGroupManagersClient(), compute_v1.InstancesClient())


def _api_error() -> type[Exception]:
    """Google's base API error, imported only when a drill runs (keeps ``spotgpu`` startup light)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from google.api_core.exceptions import GoogleAPIError
    return GoogleAPIError


@dataclass
class Timeline:
    """Elapsed-seconds events, echoed to ``out`` as they happen."""

    clock: Callable[[], float]
    out: Callable[[str], None] = print
    start: float = 0.0
    events: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.start = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.start

    def add(self, text: str) -> None:
        at = self.elapsed()
        self.events.append((at, text))
        self.out(f"+{at:7.1f}s  {text}")


@dataclass(frozen=True)
class DrillResult:
    mig: str
    victim: str
    zone: str
    replacement: str
    reacquired_after_seconds: float
    events: tuple[tuple[float, str], ...]
    dry_run: bool = False


def _labels(mig: Any) -> dict[str, str]:
    config = getattr(mig, "all_instances_config", None)
    props = getattr(config, "properties", None)
    return dict(getattr(props, "labels", None) or {})


def _is_pool_mig(mig: Any, pool: str, environment: str | None) -> bool:
    name = str(mig.name)
    if environment is not None and not name.startswith(f"{pool}-{environment}-spot-"):
        return False
    labels = _labels(mig)
    if labels:
        return labels.get(tags.ROLE) == "spot-pool" and labels.get(tags.POOL) == tags.gcp_label_value(pool)
    return re.fullmatch(rf"{re.escape(pool)}-[a-z0-9-]+-spot-[a-z0-9-]+", name) is not None


def find_spot_migs(clients: GcpClients, project: str, region: str, pool: str, environment: str | None) -> list[str]:
    try:
        migs = list(clients.migs.list(project=project, region=region))
    except _api_error() as err:
        raise DrillError(f"listing MIGs in {project}/{region} failed: {err}") from err
    found = sorted(str(m.name) for m in migs if _is_pool_mig(m, pool, environment))
    if not found:
        raise DrillError(
            f"no spot MIG of pool {pool!r} in {project}/{region}; check --pool/--project/--region "
            "(the pool's MIGs are named <pool>-<environment>-spot-<key>)"
        )
    return found


def _managed(clients: GcpClients, project: str, region: str, mig: str) -> list[Any]:
    return list(clients.migs.list_managed_instances(project=project, region=region, instance_group_manager=mig))


def _zone_and_name(instance_url: str) -> tuple[str, str]:
    match = re.search(r"zones/([^/]+)/instances/([^/]+)$", instance_url)
    if not match:
        raise DrillError(f"unexpected instance URL {instance_url!r}")
    return match.group(1), match.group(2)


def pick_victim(instances: Iterable[Any]) -> Any | None:
    """The first (by name) RUNNING VM the MIG is not already acting on."""
    ready = [m for m in instances if m.instance_status == "RUNNING" and m.current_action in ("NONE", "")]
    return min(ready, key=lambda m: str(m.name)) if ready else None


@dataclass
class _Follow:
    """Replacement detection over successive ``listManagedInstances`` snapshots."""

    victim_id: int
    initial_ids: set[int]
    left_running: bool = False
    gone: bool = False
    statuses: dict[int, str] = field(default_factory=dict)

    def step(self, snapshot: list[Any], timeline: Timeline) -> Any | None:
        by_id = {int(m.id): m for m in snapshot if m.id}
        victim = by_id.get(self.victim_id)
        if victim is None and not self.gone:
            timeline.add("preempted VM is gone from the MIG")
            self.gone = self.left_running = True
        for mid, m in sorted(by_id.items()):
            status = f"{m.instance_status or 'NO_VM'}/{m.current_action or 'NONE'}"
            if self.statuses.get(mid) != status and (mid == self.victim_id or mid not in self.initial_ids):
                timeline.add(f"{m.name} (id {mid}): {status}")
            self.statuses[mid] = status
        if victim is not None and victim.instance_status != "RUNNING":
            self.left_running = True
        if not self.left_running:
            return None
        for mid, m in by_id.items():
            new = mid not in self.initial_ids
            if m.instance_status == "RUNNING" and (new or mid == self.victim_id):
                return m
        return None


def run_drill(
    clients: GcpClients,
    *,
    project: str,
    region: str,
    pool: str,
    environment: str | None = None,
    timeout_seconds: float = 1800,
    poll_seconds: float = 15,
    dry_run: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    out: Callable[[str], None] = print,
    on_start: Callable[[], None] | None = None,
) -> DrillResult:
    """Preempt one RUNNING VM of the pool and follow it until a replacement is RUNNING.

    With ``dry_run`` it stops after picking the VM and returns a result with ``dry_run`` set.
    ``on_start`` is called once the preemption was accepted (the drill has then started).
    """
    timeline = Timeline(clock, out)
    api_error = _api_error()
    victim = None
    mig = ""
    managed: list[Any] = []
    for mig in find_spot_migs(clients, project, region, pool, environment):
        try:
            managed = _managed(clients, project, region, mig)
        except api_error as err:
            raise DrillError(f"listing managed instances of {mig} failed: {err}") from err
        victim = pick_victim(managed)
        if victim is not None:
            break
    if victim is None:
        raise DrillError(
            f"pool {pool!r} has no RUNNING VM without a pending action; scale the spot MIG up "
            "(capacity.target >= 1) and wait for a VM to start"
        )
    zone, name = _zone_and_name(str(victim.instance))
    timeline.add(f"picked {name} in {zone} from {mig} (id {victim.id})")
    if dry_run:
        timeline.add(f"dry run: would call simulateMaintenanceEvent on {name}; nothing was preempted")
        return DrillResult(mig, name, zone, "", 0.0, tuple(timeline.events), dry_run=True)
    try:
        operation = clients.instances.simulate_maintenance_event(project=project, zone=zone, instance=name)
    except api_error as err:
        raise DrillError(f"simulateMaintenanceEvent on {name} failed: {err}") from err
    timeline.add(f"simulateMaintenanceEvent accepted ({getattr(operation, 'name', 'operation')})")
    if on_start:
        on_start()
    follow = _Follow(int(victim.id), {int(m.id) for m in managed if m.id})
    trigger_at = timeline.elapsed()
    failures = 0
    while timeline.elapsed() - trigger_at < timeout_seconds:
        sleep(poll_seconds)
        try:
            snapshot = _managed(clients, project, region, mig)
            failures = 0
        except api_error as err:
            failures += 1
            timeline.add(f"poll failed ({failures}/{MAX_POLL_FAILURES}): {err}")
            if failures >= MAX_POLL_FAILURES:
                raise DrillFailed(f"listing managed instances of {mig} failed {failures} times in a row") from err
            continue
        replacement = follow.step(snapshot, timeline)
        if replacement is not None:
            latency = timeline.elapsed() - trigger_at
            timeline.add(f"replacement {replacement.name} RUNNING: reacquired after {latency:.0f} s")
            return DrillResult(mig, name, zone, str(replacement.name), latency, tuple(timeline.events))
    timeline.add(f"timed out after {timeout_seconds:.0f} s without a RUNNING replacement")
    raise DrillTimeout(
        f"{name} was not replaced within {timeout_seconds:.0f} s; check the MIG's errors "
        f"(gcloud compute instance-groups managed list-errors {mig} --region {region}) for capacity or quota"
    )


def _body(args: argparse.Namespace, clients: GcpClients) -> Callable[[DrillOutput], Outcome]:
    def body(output: DrillOutput) -> Outcome:
        def started() -> None:
            output.started = True

        result = run_drill(
            clients,
            project=args.project,
            region=args.region,
            pool=args.pool,
            environment=args.environment,
            timeout_seconds=args.timeout_seconds,
            poll_seconds=args.poll_seconds,
            dry_run=args.dry_run,
            out=output,
            on_start=started,
        )
        details = {
            "mig": result.mig,
            "victim": result.victim,
            "zone": result.zone,
            "replacement": result.replacement or None,
            "reacquiredAfterSeconds": None if result.dry_run else round(result.reacquired_after_seconds, 1),
            "timeline": [{"seconds": round(t, 1), "event": text} for t, text in result.events],
        }
        return ("dry-run" if result.dry_run else "passed"), "", details

    return body


def _command(args: argparse.Namespace, clients_factory: Callable[[], GcpClients] = default_clients) -> int:
    output = DrillOutput("gcp", args.pool, as_json=getattr(args, "json", False), dry_run=args.dry_run)
    try:
        clients = clients_factory()
    except ImportError as err:
        return finish(output, raising(err))
    except Exception as err:  # google.auth's DefaultCredentialsError and kin: no credentials here
        return finish(
            output,
            raising(DrillError(f"cannot create Compute Engine clients ({err}); fix: gcloud auth application-default login")),
        )
    try:
        api_errors: tuple[type[BaseException], ...] = (_api_error(),)
    except ImportError:  # stub clients without the SDK (tests)
        api_errors = ()
    fix = "check --project and the caller's compute.instanceGroupManagers.list and simulateMaintenanceEvent rights"
    return finish(output, _body(args, clients), sdk_errors=api_errors, sdk_fix=fix)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "gcp",
        help="preempt one Spot VM of a GCP pool (simulateMaintenanceEvent) and time its replacement",
        description="Find the pool's spot MIGs, preempt one RUNNING VM and follow the MIG until a replacement "
        "is RUNNING. Exit 0 replaced, 1 preempted but not replaced in time, 2 not started.",
    )
    add_drill_flags(p, pool_help="pool name from the stack config", poll_seconds=15, timeout_seconds=1800, legacy=True)
    p.add_argument("--project", required=True, help="Google Cloud project id")
    p.add_argument("--region", required=True, help="region of the pool's MIGs, e.g. us-central1")
    p.add_argument("--environment", help="stack environment (dev, prod) when a project holds several")
    p.set_defaults(func=_command)
