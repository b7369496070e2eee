"""Test helper: run a function that builds resources and get every registration back.

    resources = record(lambda: GpuPool("p", plan_pool(args)))
    by_type = index(resources)
    assert by_type["aws:autoscaling/group:Group"][0].inputs["capacityRebalance"] is True
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pulumi

from spotgpu_pulumi.offline.mocks import RecordedResource, RecordingMocks, RecordingMonitor


def record(
    program: Callable[[], Any], *, project: str = "spotgpu", stack: str = "test", preview: bool = False
) -> list[RecordedResource]:
    """Run ``program`` under mocks; returns only after every registration finished."""
    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    pulumi.runtime.test(program)()
    return monitor.recorded


def index(resources: list[RecordedResource]) -> dict[str, list[RecordedResource]]:
    """Registrations grouped by type token."""
    out: dict[str, list[RecordedResource]] = defaultdict(list)
    for r in resources:
        out[r.type].append(r)
    return out


def children_of(resources: list[RecordedResource], parent: RecordedResource) -> list[RecordedResource]:
    return [r for r in resources if r.parent == parent.urn]
