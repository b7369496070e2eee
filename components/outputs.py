"""The outputs every cloud's ``GpuPool`` has, under the same names.

A platform team wires pools into other stacks (the controller, dashboards, a
job launcher) without knowing the cloud: ``checkpointStore``, ``spotGroups``,
``fallbackGroup``, ``events``, ``nodeIdentity``, ``controllerIdentity`` and
``controllerStateUrl`` mean the same on AWS, Google Cloud and Azure. Lists are
lists. Each cloud adds its own details next to them (``docs/<cloud>.md``).
"""

# No `from __future__ import annotations`: the package schema (spotgpu_pulumi.package) reads these as objects.

from typing import Any

import pulumi

#: The keys every pool's exports carry, in this order.
COMMON_KEYS = (
    "cloud",
    "region",
    "checkpointStore",
    "spotGroups",
    "fallbackGroup",
    "events",
    "nodeIdentity",
    "controllerIdentity",
    "controllerStateUrl",
)


class PoolOutputs:
    """Output attributes shared by every ``GpuPool`` (the package schema reads them from here)."""

    cloud: pulumi.Output[str]
    """aws, gcp or azure."""
    region: pulumi.Output[str]
    """AWS region, Google Cloud region or Azure location the pool runs in."""
    checkpoint_store: pulumi.Output[str]
    """URL of the pool's checkpoint store (s3://, gs:// or az:// with the pool's prefix)."""
    spot_groups: pulumi.Output[list[str]]
    """Names of the spot groups: the Auto Scaling group (or EC2 Fleet id), the spot MIGs, the spot scale sets."""
    fallback_group: pulumi.Output[str]
    """Name of the on-demand fallback group (ASG, MIG or scale set), empty until the controller grows it."""
    events: pulumi.Output[str]
    """Where interruption events arrive: the SQS queue URL, the Pub/Sub subscription, or "" on Azure (Scheduled Events are read on each VM)."""
    node_identity: pulumi.Output[str]
    """The VMs' identity: IAM role ARN, service account email, managed identity client id."""
    controller_identity: pulumi.Output[str]
    """The fallback controller's identity: IAM role ARN, service account email, managed identity client id."""
    controller_state_url: pulumi.Output[str]
    """Where the fallback controller keeps its state (next to the checkpoints)."""


def common_exports(component: PoolOutputs, **values: Any) -> dict[str, Any]:
    """Set the shared output attributes on ``component``; returns them keyed as exported (camelCase)."""
    missing = [key for key in COMMON_KEYS if key not in values]
    if missing:
        raise TypeError(f"common_exports: missing {missing}")
    exported: dict[str, Any] = {}
    for key in COMMON_KEYS:
        value = values[key]
        attribute = "".join("_" + c.lower() if c.isupper() else c for c in key)
        setattr(component, attribute, pulumi.Output.from_input(value))
        exported[key] = value
    return exported
