"""The controller's two conversations besides the cloud: node agents and the scheduler.

Both go through the pool's object store, so no extra service or network path is
needed and the same code works on all three clouds:

* drain requests: ``drains/<pool>/<vm>.json`` = ``{"requestedAt": t}``; the node
  agent stops new work, commits a checkpoint, and reports it;
* agent commits: ``agents/<pool>/<vm>.json`` = ``{"lastCommittedAt": t}``, written
  by the node agent after each *committed* generation (marker written, read back);
* scheduler: ``scheduler/<pool>.json`` = ``{"state": "deferred"|"running", ...}``.

The scheduler hook is pluggable (any object with ``defer``/``resume``), so a
Slurm or Kueue integration can replace the store-backed default.
"""

from __future__ import annotations

from typing import Any, Protocol

from spotgpu.contract.state_store import JsonStore


def vm_key(provider: str, instance_id: str, name: str, vm_name: str | None = None) -> str:
    """The id the controller knows a VM by, in its observations and in the drain channel's keys.

    What each cloud's group API lists, so the agent on the VM and the controller's adapter name
    it alike: AWS the instance id; GCP the instance name (``listManagedInstances`` names
    instances, ``deleteInstances`` takes their URLs); Azure the VM name (a Flexible scale set's
    ``deleteInstances`` takes it; ``vm_name`` overrides what IMDS says). Empty until known.
    """
    if provider == "aws":
        return instance_id
    if provider == "azure":
        return vm_name or name
    return name


class SchedulerHook(Protocol):
    def defer(self, pool: str, reason: str, at: float) -> None: ...
    def resume(self, pool: str, at: float) -> None: ...


class StoreSchedulerHook:
    def __init__(self, store: JsonStore) -> None:
        self.store = store

    def defer(self, pool: str, reason: str, at: float) -> None:
        self.store.put(f"scheduler/{pool}.json", {"state": "deferred", "reason": reason, "at": at})

    def resume(self, pool: str, at: float) -> None:
        self.store.put(f"scheduler/{pool}.json", {"state": "running", "at": at})


class DrainChannel:
    """Drain requests out to node agents, committed-checkpoint times back in."""

    def __init__(self, store: JsonStore) -> None:
        self.store = store

    def request(self, pool: str, vm_id: str, at: float) -> None:
        self.store.put(f"drains/{pool}/{vm_id}.json", {"requestedAt": at})

    def requested_at(self, pool: str, vm_id: str) -> float | None:
        """What the node agent polls: the time the controller asked this VM to drain, if it did."""
        doc = self.store.get(f"drains/{pool}/{vm_id}.json")
        if doc and isinstance(doc.get("requestedAt"), int | float):
            return float(doc["requestedAt"])
        return None

    def report_commit(self, pool: str, vm_id: str, at: float, **detail: Any) -> None:
        """What the node agent calls after a committed checkpoint (also used by simulations).

        The controller reads ``lastCommittedAt`` (drains) and ``step`` (progress: with the
        pool's ``totalSteps`` it is the committed work the deadline is judged on); the rest
        of ``detail`` (generation, basis...) is for people reading the store.
        """
        self.store.put(f"agents/{pool}/{vm_id}.json", {**detail, "lastCommittedAt": at})

    def commits(self, pool: str, vm_ids: list[str]) -> dict[str, float]:
        return {vm: at for vm, (at, _) in self.reports(pool, vm_ids).items()}

    def reports(self, pool: str, vm_ids: list[str]) -> dict[str, tuple[float, int | None]]:
        """vm id -> (lastCommittedAt, the committed step if the agent reported one)."""
        out: dict[str, tuple[float, int | None]] = {}
        for vm_id in vm_ids:
            doc = self.store.get(f"agents/{pool}/{vm_id}.json")
            if doc and isinstance(doc.get("lastCommittedAt"), int | float):
                step = doc.get("step")
                out[vm_id] = (float(doc["lastCommittedAt"]), int(step) if isinstance(step, int) else None)
        return out
