"""The cloud-neutral view the rules judge: spot pools, fallback groups, checkpoint stores.

Each cloud module (:mod:`spotgpu_guard.aws`, ``gcp``, ``azure``) turns concrete
resources into these records, so a rule is written once and holds for a stack
of raw resources exactly as for one built by the spotgpu components.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spotgpu.models.notice import AwsNoticeContract, AzureNoticeContract, GcpNoticeContract
from spotgpu_guard.inventory import Res
from spotgpu_guard.links import Links

Contract = AwsNoticeContract | GcpNoticeContract | AzureNoticeContract


@dataclass
class Bootstrap:
    """Where a pool's boot script lives and its decoded text (str, UNKNOWN or None)."""

    where: str
    text: Any


@dataclass
class Gap:
    """One thing a resource lacks, phrased as ``what is wrong; fix: how``."""

    message: str
    waiver: str | None = None  # config key that may waive it (e.g. zero-notice)
    #: the fix in stack-config terms, for a resource a spotgpu component made (spotgpu_guard.stack_keys)
    stack_fix: str | None = None


@dataclass
class SpotPool:
    """A spot/preemptible GPU compute resource and what it takes with it."""

    res: Res
    cloud: str
    kind: str
    links: Links
    gpu_types: set[str] = field(default_factory=set)
    zones: set[str] = field(default_factory=set)
    zone_note: str = ""
    bootstraps: list[Bootstrap] = field(default_factory=list)
    contract: Contract | None = None
    contract_problem: str = ""
    notice_gaps: list[Gap] = field(default_factory=list)
    caveat: str = ""  # e.g. "spot share unknown until apply; judged as spot"

    def describe(self) -> str:
        text = f"{self.kind} {self.res.label()}"
        return f"{text} [{self.caveat}]" if self.caveat else text


@dataclass
class Group:
    """A compute group that could serve as a pool's on-demand fallback."""

    res: Res
    cloud: str
    kind: str
    names: set[str]
    on_demand: bool | None  # None: unknown until apply
    detail: str = ""


@dataclass
class Store:
    """A bucket or storage account that could hold checkpoints."""

    res: Res
    cloud: str
    kind: str
    names: set[str]
    gaps: list[Gap] = field(default_factory=list)
    role_tagged: bool = False
