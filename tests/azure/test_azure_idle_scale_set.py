"""An Azure scale set no rung grows (a second VM size, ladder without alternate_sku, kept by
``optOut.idleRungs``), through the controller config the pool renders and the controller's own
planner: what ``spotgpu.models.stack.idle_groups`` tells the user happens to it.

The controller keeps the primary at ``capacity.target`` and drains any other spot VM as surplus
once it is there (removed only after its agent committed). Defect: the pool created the other
scale sets with a share of the target (1 of 2 here), so the first tick asked the primary for a
VM more, the pool paid for three, and the second set's VM was then drained from the running
gang. The sets are now created empty, as the GCP MIGs are.
"""

from __future__ import annotations

import json
from typing import Any

from azure_fixtures import stack_raw

from spotgpu.config import parse_stack_config
from spotgpu.controller.actions import RemoveInstance, RequestDrain, SetDesired
from spotgpu.controller.config import parse_controller_config
from spotgpu.controller.observe import GroupObservation, PoolObservation, Vm
from spotgpu.controller.reconcile import reconcile
from spotgpu.controller.runner import build_plans
from spotgpu.controller.state import PoolState
from spotgpu.models.pool_types import spot_groups
from spotgpu.models.stack import idle_groups
from spotgpu_pulumi.azure.controller_job import azure_config_json

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
SETS = ("set-0", "set-1", "set-2")  # one scale set per VM size, the primary first


def _stack() -> Any:
    raw = stack_raw("prod")
    raw["ladders"]["no-sku"] = {
        "steps": [s for s in raw["ladders"]["training-az"]["steps"] if s["kind"] != "alternate_sku"]
    }
    pool_raw = next(p for p in raw["pools"] if p["cloud"] == "azure")
    pool_raw.update(ladder="no-sku", optOut={"idleRungs": "the other sizes are standby capacity we hold by hand"})
    stack = parse_stack_config(raw)
    pool = next(p for p in stack.pools if p.name == pool_raw["name"])
    workload, ladder = stack.workload_for(pool), stack.ladder_for(pool)
    assert len(idle_groups(pool, ladder, workload)) == 2  # what the user is told about set-1 and set-2
    return pool, workload, ladder


def _plan() -> Any:
    pool, workload, ladder = _stack()
    doc = azure_config_json(pool, workload, ladder, subscription_id=SUBSCRIPTION, resource_group="ml-prod",
                            state_url="file:///unused", spot_sets=list(SETS), fallback_set="od")  # fmt: skip
    (plan,) = build_plans(parse_controller_config(json.loads(doc))).values()
    return plan


def _obs(plan: Any, now: float, counts: dict[str, tuple[int, int]], commits: dict[str, float] | None = None) -> PoolObservation:
    """counts: set -> (desired, ready VMs)."""
    groups = {}
    for name in (*SETS, "od"):
        desired, ready = counts.get(name, (0, 0))
        vms = tuple(Vm(f"{name}-vm{i}", name, True, ready_at=now - 60) for i in range(ready))
        groups[name] = GroupObservation(name, desired, vms)
    return PoolObservation(plan.name, now, groups, commits=commits or {})


def _desired(actions: tuple[object, ...]) -> dict[str, int]:
    return {a.group: a.desired for a in actions if isinstance(a, SetDesired)}


def test_the_sets_as_created_are_what_the_controller_keeps() -> None:
    pool, workload, _ = _stack()
    plan, state = _plan(), PoolState()
    created = {name: (g.start, g.start) for name, g in zip(SETS, spot_groups(pool, workload), strict=True)}
    assert created == {"set-0": (2, 2), "set-1": (0, 0), "set-2": (0, 0)}
    assert reconcile(plan, _obs(plan, 0, created), state).actions == ()
    assert reconcile(plan, _obs(plan, plan.stable_spot_seconds + 1, created), state).actions == ()  # no drain


def test_a_vm_the_primary_loses_is_replaced_in_the_primary() -> None:
    plan, state = _plan(), PoolState()
    r = reconcile(plan, _obs(plan, 100, {"set-0": (2, 1)}), state)  # one VM evicted; the set asks for 2 again
    assert r.actions == () or set(_desired(r.actions)) <= {"set-0"}  # set-1 and set-2 are never asked for VMs
    assert not any(isinstance(a, RequestDrain) for a in r.actions)


def test_the_idle_sets_vm_is_drained_as_surplus_once_the_primary_is_at_target_and_removed_after_its_commit() -> None:
    plan, state = _plan(), PoolState()
    both = {"set-0": (2, 2), "set-1": (1, 1)}  # the primary back at target 2; set-1 still holds its VM
    assert not any(isinstance(a, RequestDrain) for a in reconcile(plan, _obs(plan, 0, both), state).actions)
    later = plan.stable_spot_seconds + 1
    r = reconcile(plan, _obs(plan, later, both), state)
    assert [(a.group, a.vm_id) for a in r.actions if isinstance(a, RequestDrain)] == [("set-1", "set-1-vm0")]
    assert not any(isinstance(a, RemoveInstance) for a in r.actions)  # not before its agent commits
    r = reconcile(plan, _obs(plan, later + 60, both, commits={"set-1-vm0": later + 30}), state)
    assert [(a.group, a.vm_id) for a in r.actions if isinstance(a, RemoveInstance)] == [("set-1", "set-1-vm0")]
    assert not any(isinstance(a, RequestDrain | RemoveInstance) and a.group == "set-0" for a in r.actions)
