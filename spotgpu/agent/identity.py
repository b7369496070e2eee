"""Who this VM is, from each cloud's metadata identity fields (for telemetry labels)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Capacity = Literal["spot", "on-demand", "unknown"]


@dataclass(frozen=True)
class VmIdentity:
    provider: str
    instance_id: str
    instance_type: str
    zone: str
    region: str
    capacity: Capacity
    #: Azure: the compute name Scheduled Events list in ``Resources``.
    name: str = ""

    def as_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items()}


def unknown_identity(provider: str) -> VmIdentity:
    return VmIdentity(provider, "", "", "", "", "unknown")
