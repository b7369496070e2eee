"""``spotgpu drill azure``: evict one running Spot VM of a pool and follow it to a replacement.

What it does, with ``azure-mgmt-compute``:

1. finds the pool's spot scale sets by their tags (``spotgpu-pool`` = the pool,
   ``spotgpu-role`` = ``spot-pool``), as the components set them;
2. lists the resource group's VMs and keeps the Flexible members of those
   scale sets (``virtualMachineScaleSet.id``), or VMs tagged with the pool;
3. picks one running Spot VM (``--vm`` to choose) and calls
   ``virtual_machines.simulate_eviction`` (synchronous in azure-mgmt-compute 39;
   Azure then sends the VM a ``Preempt`` scheduled event, >= 30 s ahead);
4. polls until that VM is gone (eviction policy Delete) or deallocated
   (Deallocate), then until a replacement Spot VM of the pool is running, and
   prints the timeline with seconds since the eviction request.

``--dry-run`` does steps 1-3 with read-only calls and stops before ``simulate_eviction``.
The client, clock and sleep are injected so the whole flow is tested offline.
A replacement only appears if something refills the pool: Spot restore
(``spotRestoreTimeout``), the fallback controller, or an operator.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from spotgpu.contract import tags
from spotgpu.contract.tags import SPOT_POOL_ROLE
from spotgpu.drills.common import DrillError, DrillFailed, DrillOutput, Outcome, add_drill_flags, finish, raising

__all__ = ["Drill", "DrillError", "DrillFailed", "run"]

POOL_TAG, ROLE_TAG = tags.POOL, tags.ROLE
RUNNING = "running"


@dataclass(frozen=True)
class Event:
    seconds: float
    text: str


@dataclass
class DrillResult:
    evicted_vm: str
    replacement_vm: str | None
    timeline: list[Event] = field(default_factory=list)
    dry_run: bool = False


def _tags(resource: Any) -> dict[str, str]:
    return dict(getattr(resource, "tags", None) or {})


def _lower(value: str | None) -> str:
    return (value or "").lower()


def pool_scale_sets(client: Any, resource_group: str, pool: str) -> dict[str, str]:
    """{lowercased scale set id: name} for the pool's spot scale sets (Azure ids are case-insensitive)."""
    found = {}
    for vmss in client.virtual_machine_scale_sets.list(resource_group):
        tags = _tags(vmss)
        if tags.get(POOL_TAG) == pool and tags.get(ROLE_TAG) == SPOT_POOL_ROLE:
            found[_lower(vmss.id)] = vmss.name
    return found


def pool_members(client: Any, resource_group: str, pool: str, scale_set_ids: Iterable[str]) -> list[Any]:
    """VMs in the pool's scale sets (Flexible members are ordinary VMs pointing at their scale set)."""
    ids = set(scale_set_ids)
    members = []
    for vm in client.virtual_machines.list(resource_group):
        parent = getattr(vm, "virtual_machine_scale_set", None)
        parent_id = _lower(getattr(parent, "id", None))
        if parent_id in ids or (not parent_id and _tags(vm).get(POOL_TAG) == pool):
            members.append(vm)
    return members


def _not_found(err: Exception) -> bool:
    if type(err).__name__ == "ResourceNotFoundError":
        return True
    return getattr(err, "status_code", None) == 404


def power_state(client: Any, resource_group: str, vm_name: str) -> str | None:
    """``running``, ``deallocated``, ... from the instance view; None once the VM no longer exists."""
    try:
        view = client.virtual_machines.instance_view(resource_group, vm_name)
    except Exception as err:
        if _not_found(err):
            return None
        raise
    for status in getattr(view, "statuses", None) or []:
        code = getattr(status, "code", "") or ""
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1]
    return "unknown"


def _is_spot(vm: Any) -> bool:
    return _lower(getattr(vm, "priority", None)) == "spot"


def pick_victim(client: Any, resource_group: str, members: list[Any], wanted: str | None) -> str:
    """A running Spot member (``wanted`` if given); clear errors otherwise."""
    if not members:
        raise DrillError("the pool has no VMs; scale a spot scale set up (capacity >= 1) and retry")
    if wanted:
        chosen = [vm for vm in members if vm.name == wanted]
        if not chosen:
            raise DrillError(
                f"VM {wanted} is not a member of the pool; pick one of {sorted(vm.name for vm in members)}"
            )
        if not _is_spot(chosen[0]):
            raise DrillError(
                f"VM {wanted} has priority {getattr(chosen[0], 'priority', None) or 'Regular'}; "
                "simulate eviction works on Spot VMs only, pick a Spot VM"
            )
        state = power_state(client, resource_group, wanted)
        if state != RUNNING:
            raise DrillError(f"VM {wanted} is {state or 'gone'}, not running; pick a running Spot VM")
        return wanted
    spot = [vm for vm in members if _is_spot(vm)]
    if not spot:
        names = sorted(vm.name for vm in members)
        raise DrillError(
            f"no Spot VM in the pool, only regular-priority VMs {names}; simulate eviction works on Spot VMs only"
        )
    for vm in sorted(spot, key=lambda v: v.name):
        if power_state(client, resource_group, vm.name) == RUNNING:
            return str(vm.name)
    raise DrillError(f"no Spot VM of the pool is running ({sorted(vm.name for vm in spot)}); wait and retry")


@dataclass
class Drill:
    """One drill run; ``clock`` and ``sleep`` are injected for tests."""

    client: Any
    resource_group: str
    pool: str
    timeout_seconds: float = 1800.0
    poll_seconds: float = 10.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    out: TextIO = sys.stdout
    #: where lines go instead of ``out`` (the CLI's recorder)
    echo: Callable[[str], None] | None = None
    timeline: list[Event] = field(default_factory=list)
    #: set once simulate_eviction was accepted
    started: bool = False
    _start: float = 0.0

    def note(self, text: str) -> None:
        event = Event(round(self.clock() - self._start, 1), text)
        self.timeline.append(event)
        line = f"{event.seconds:8.1f}s  {text}"
        if self.echo is not None:
            self.echo(line)
        else:
            print(line, file=self.out, flush=True)

    def _members(self, scale_sets: dict[str, str]) -> list[Any]:
        return pool_members(self.client, self.resource_group, self.pool, scale_sets)

    def _wait(self, what: str, done: Callable[[], bool]) -> None:
        while not done():
            if self.clock() - self._start >= self.timeout_seconds:
                raise DrillFailed(
                    f"timed out after {self.timeout_seconds:g} s waiting for {what}; "
                    "check the scale set in the portal (Spot capacity, quota) and raise --timeout-seconds"
                )
            self.sleep(self.poll_seconds)

    def run(self, vm_name: str | None = None, *, dry_run: bool = False) -> DrillResult:
        self._start = self.clock()
        scale_sets = pool_scale_sets(self.client, self.resource_group, self.pool)
        if not scale_sets:
            raise DrillError(
                f"no spot scale set tagged {POOL_TAG}={self.pool} in resource group {self.resource_group}; "
                "check --pool and --resource-group (run `pulumi up` first)"
            )
        members = self._members(scale_sets)
        victim = pick_victim(self.client, self.resource_group, members, vm_name)
        before = {vm.name for vm in members}
        self.note(f"picked running Spot VM {victim} ({len(members)} VMs in {len(scale_sets)} scale sets)")
        if dry_run:
            self.note(f"dry run: would call simulate_eviction on {victim}; nothing was evicted")
            return DrillResult(victim, None, self.timeline, dry_run=True)
        try:
            self.client.virtual_machines.simulate_eviction(self.resource_group, victim)
        except Exception as err:
            raise DrillError(f"simulate_eviction({victim}) failed: {err}") from err
        self.started = True
        self.note("eviction requested (the VM gets a Preempt scheduled event, >= 30 s ahead)")

        last = {"state": RUNNING}

        def evicted() -> bool:
            state = power_state(self.client, self.resource_group, victim)
            if state != last["state"]:
                self.note(f"{victim}: {state or 'deleted'}")
                last["state"] = state or "deleted"
            return state is None or state == "deallocated"

        self._wait(f"{victim} to be evicted", evicted)
        replacement: dict[str, str | None] = {"name": None}

        def replaced() -> bool:
            for vm in self._members(scale_sets):
                fresh = vm.name not in before or (vm.name == victim and last["state"] == "deallocated")
                if fresh and _is_spot(vm) and power_state(self.client, self.resource_group, vm.name) == RUNNING:
                    replacement["name"] = vm.name
                    return True
            return False

        self._wait("a replacement Spot VM to run", replaced)
        self.note(f"replacement {replacement['name']} running")
        return DrillResult(victim, replacement["name"], self.timeline)


def make_client(subscription: str) -> Any:  # pragma: no cover - needs Azure credentials
    from azure.identity import DefaultAzureCredential
    from azure.mgmt.compute import ComputeManagementClient

    return ComputeManagementClient(DefaultAzureCredential(), subscription)


def _azure_errors() -> tuple[type[BaseException], ...]:
    try:
        from azure.core.exceptions import AzureError
    except ImportError:
        return ()
    return (AzureError,)


def run(
    args: argparse.Namespace,
    client_factory: Callable[[str], Any] = make_client,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    output = DrillOutput("azure", args.pool, as_json=getattr(args, "json", False), dry_run=getattr(args, "dry_run", False))
    try:
        client = client_factory(args.subscription)
    except ImportError as err:
        return finish(output, raising(err))
    drill = Drill(
        client=client,
        resource_group=args.resource_group,
        pool=args.pool,
        timeout_seconds=args.timeout_seconds,
        poll_seconds=args.poll_seconds,
        clock=clock,
        sleep=sleep,
        echo=output,
    )

    def body(out: DrillOutput) -> Outcome:
        try:
            result = drill.run(args.vm, dry_run=out.dry_run)
        finally:
            out.started = drill.started
        details = {
            "vm": result.evicted_vm,
            "replacement": result.replacement_vm,
            "timeline": [{"seconds": e.seconds, "event": e.text} for e in result.timeline],
        }
        if result.dry_run:
            return "dry-run", "", details
        total = result.timeline[-1].seconds if result.timeline else 0.0
        out(f"drill passed: {result.evicted_vm} evicted, {result.replacement_vm} running after {total:.1f} s")
        return "passed", "", details

    fix = "check `az login`, --subscription, --resource-group and the caller's VM read and simulateEviction rights"
    return finish(output, body, sdk_errors=_azure_errors(), sdk_fix=fix)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "azure",
        help="simulate eviction of one running Spot VM of an Azure pool and follow it to a replacement",
        description="Evict one running Spot VM of the pool's scale sets and follow it to a running replacement. "
        "Needs `az login` (or any DefaultAzureCredential) with VM read and simulateEviction rights. "
        "Exit 0 replaced, 1 evicted but not replaced in time, 2 not started.",
    )
    add_drill_flags(p, pool_help="pool name (the spotgpu-pool tag)", poll_seconds=10.0, timeout_seconds=1800.0, legacy=True)
    p.add_argument("--subscription", required=True, help="subscription id")
    p.add_argument("--resource-group", required=True, help="resource group of the pool's scale sets")
    p.add_argument("--vm", default=None, help="evict this VM instead of the first running Spot VM")
    p.set_defaults(func=run)
