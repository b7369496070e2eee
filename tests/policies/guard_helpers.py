"""Shared helpers for the policy-pack tests: record raw resources, judge them with the real pack."""

from __future__ import annotations

import functools
import runpy
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pulumi
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.inventory import Inventory, Res
from spotgpu_guard.values import plain

from spotgpu_pulumi.offline.mocks import RecordedResource, RecordingMocks, RecordingMonitor, fake_outputs
from spotgpu_pulumi.offline.policy_harness import LoadedPack, analyze_with, load_pack

REPO = Path(__file__).resolve().parents[2]
PACK_DIR = REPO / "policies"
#: The pack's rules and their default enforcement levels.
EXPECTED_DEFAULTS = {
    "spot-gpu-requires-checkpoint": "mandatory",
    "spot-gpu-requires-fallback": "mandatory",
    "checkpoint-store-hardened": "mandatory",
    "notice-handled": "mandatory",
    "periodic-checkpoint-primary": "mandatory",
    "spot-eligible": "advisory",
    "capacity-diversified": "advisory",
    "ladder-ceilings-cover-prices": "mandatory",
    "deadline-escalation-reachable": "advisory",
    "azure-max-price-covers-spot": "mandatory",
    "azure-max-price-below-on-demand": "advisory",
    "fallback-can-replace-pool": "advisory",
    "gpu-types-known": "advisory",
    "gpu-type-holds-workload": "mandatory",
    "boot-data-has-no-credentials": "mandatory",
    "checkpoint-tier-has-disk": "advisory",
    "azure-one-scheduled-events-topic": "mandatory",
}
RAW_PROGRAM = Path(__file__).resolve().parent / "programs" / "raw"


class _UnknownMocks(RecordingMocks):
    """Resources named in ``unknown`` get no id and no outputs: everything derived is unknown at preview."""

    def __init__(self, unknown: Iterable[str]) -> None:
        super().__init__()
        self.unknown = set(unknown)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        if args.name in self.unknown:
            self.resources.append(args)
            return "", {}
        return super().new_resource(args)


class _FirstPreviewMocks(RecordingMocks):
    """A first real ``pulumi preview``: every resource is new, so ids and computed outputs are unknown.

    Inputs and (auto)names stay known, as the provider's Check returns them. User-assigned
    identities keep their ids only because the Azure SDK cannot deserialize an unknown map key.
    """

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        if args.typ == "azure-native:managedidentity:UserAssignedIdentity":
            return super().new_resource(args)
        self.resources.append(args)
        _, outputs = fake_outputs(args.typ, args.name, dict(args.inputs))
        known = set(args.inputs) | {"name", "identity"}
        return "", {k: v for k, v in outputs.items() if k in known}


def record_first_preview(stack: str) -> list[RecordedResource]:
    """Run ``stacks/__main__.py`` for ``stack`` as a first preview would see it."""
    from spotgpu.config import read_stack_file

    _, engine_config = read_stack_file(str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
    mocks = _FirstPreviewMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="spotgpu", stack=stack, preview=True, monitor=monitor)
    pulumi.runtime.set_all_config(engine_config)
    sys.path.insert(0, str(REPO / "stacks"))
    try:
        pulumi.runtime.test(lambda: runpy.run_path(str(REPO / "stacks" / "__main__.py"), run_name="__main__"))()
    finally:
        sys.path.remove(str(REPO / "stacks"))
        pulumi.runtime.set_all_config({})
    return monitor.recorded


def record_preview(program: Callable[[], Any], unknown: Iterable[str] = ()) -> list[RecordedResource]:
    mocks = _UnknownMocks(unknown)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="policy-tests", stack="preview", preview=True, monitor=monitor)
    pulumi.runtime.test(program)()
    return monitor.recorded


@functools.cache
def pack() -> LoadedPack:
    return load_pack(PACK_DIR)


def judge(program: Callable[[], Any], config: dict[str, Any] | None = None,
          unknown: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The pack's diagnostics for the resources ``program`` registers."""
    return analyze_with(record_preview(program, unknown), pack(), config or {})


def by_policy(diagnostics: list[dict[str, Any]], policy: str) -> list[dict[str, Any]]:
    return [d for d in diagnostics if d["policy"] == policy]


def catalog_of(resources: list[RecordedResource]) -> Catalog:
    """What the rules see for a recording (outputs as the harness's AnalyzeStack sends them)."""
    return Catalog(Inventory(
        Res(r.type, r.urn, r.name, plain(fake_outputs(r.type, r.name, r.inputs)[1] if r.custom else r.inputs),
            r.parent or None, r.dependencies, r.property_dependencies)
        for r in resources
    ))
