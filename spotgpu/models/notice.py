"""Per-provider interruption-notice contracts.

There is deliberately no shared "notice timeout": each cloud promises something
different, and every promise is best effort.

* AWS: a 2-minute interruption notice (none usable with hibernate, which starts
  at once), plus an earlier rebalance recommendation that may never come.
* Google Cloud: a Spot VM's notice is fixed at creation, 0 s (default) or 120 s;
  after it, at most 30 s of best-effort ACPI shutdown.
* Azure: a Scheduled Events ``Preempt`` at least 30 s before eviction.

Each contract answers the two questions the rest of the system asks: how many
seconds may a *final* checkpoint safely use (after a safety margin), and is a
notice guaranteed at all (never: so periodic checkpoints carry the protection).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from spotgpu.catalogue import Cloud
from spotgpu.models.base import SpotModel, fix_hint

Provider = Cloud


class _NoticeBase(SpotModel):
    safety_margin_seconds: float = Field(
        default=15.0,
        ge=0,
        le=300,
        description="Seconds kept back from the notice for drain and acknowledgement.",
        json_schema_extra=fix_hint("use a margin between 0 and 300 seconds"),
    )

    @property
    def guaranteed(self) -> bool:
        """No provider guarantees delivery of a preemption notice."""
        return False

    @property
    def notice_seconds(self) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def final_checkpoint_budget_seconds(self) -> float:
        """Seconds a final checkpoint may use if the notice arrives on time."""
        return max(0.0, self.notice_seconds - self.safety_margin_seconds)

    def final_checkpoint_fits(self, checkpoint_write_seconds: float) -> bool:
        return checkpoint_write_seconds <= self.final_checkpoint_budget_seconds


class AwsNoticeContract(_NoticeBase):
    """EC2 Spot: 2-minute instance-action notice, optional earlier rebalance signal."""

    provider: Literal["aws"] = "aws"
    interruption_behavior: Literal["terminate", "stop", "hibernate"] = Field(
        default="terminate",
        json_schema_extra=fix_hint("use terminate (default), stop or hibernate"),
    )
    watch_rebalance: bool = Field(
        default=True,
        description="Treat the rebalance recommendation as an early, unguaranteed signal.",
    )

    @property
    def notice_seconds(self) -> float:
        # Hibernation begins immediately: the notice arrives but leaves no time.
        return 0.0 if self.interruption_behavior == "hibernate" else 120.0

    @property
    def has_early_signal(self) -> bool:
        return self.watch_rebalance


class GcpNoticeContract(_NoticeBase):
    """Compute Engine Spot: 0 s or 120 s notice fixed at creation, then <=30 s shutdown."""

    provider: Literal["gcp"] = "gcp"
    preemption_notice_seconds: Literal[0, 120] = Field(
        default=120,
        description="scheduling.preemptionNoticeDuration; only 0 and 120 exist.",
        json_schema_extra=fix_hint("use 120 (recommended) or 0; no other value exists"),
    )
    shutdown_seconds: float = Field(
        default=30.0,
        ge=0,
        le=30,
        description="Best-effort ACPI shutdown period after the notice (at most 30 s on Spot).",
        json_schema_extra=fix_hint("Spot VMs get at most 30 s of shutdown; use 0 to 30"),
    )

    @property
    def notice_seconds(self) -> float:
        # With 0 s, `preempted` flips together with G2 Soft Off: only the
        # best-effort shutdown period is left.
        if self.preemption_notice_seconds == 0:
            return self.shutdown_seconds
        return float(self.preemption_notice_seconds)


class AzureNoticeContract(_NoticeBase):
    """Azure Spot: Scheduled Events Preempt at least 30 s ahead, best effort."""

    provider: Literal["azure"] = "azure"
    minimum_notice_seconds: float = Field(
        default=30.0,
        ge=0,
        le=30,
        description="Documented minimum Preempt notice; the event's NotBefore may give more.",
        json_schema_extra=fix_hint("Azure documents 30 s; do not plan on more"),
    )

    @property
    def notice_seconds(self) -> float:
        return self.minimum_notice_seconds

    @model_validator(mode="after")
    def _margin_leaves_time(self) -> AzureNoticeContract:
        if self.safety_margin_seconds > self.minimum_notice_seconds:
            raise ValueError(
                f"safetyMarginSeconds {self.safety_margin_seconds} exceeds Azure's "
                f"{self.minimum_notice_seconds} s Preempt notice; use at most "
                f"{self.minimum_notice_seconds}"
            )
        return self


NoticeContract = Annotated[
    AwsNoticeContract | GcpNoticeContract | AzureNoticeContract,
    Field(discriminator="provider"),
]


def default_notice(provider: Provider) -> AwsNoticeContract | GcpNoticeContract | AzureNoticeContract:
    """The recommended contract for a provider (120 s on GCP, never 0 s)."""
    if provider == "aws":
        return AwsNoticeContract()
    if provider == "gcp":
        return GcpNoticeContract()
    return AzureNoticeContract()
