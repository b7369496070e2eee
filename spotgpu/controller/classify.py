"""Provider launch errors -> capacity / quota / price / other.

The same symptom ("no VM came up") needs different responses: capacity means
widen or fall back, quota means a ticket (widening to the same family will not
help), price means raise the bid or move on. Codes come from each provider's
documented error tables (see shared facts aws.md §5, gcp.md §6, azure.md §5);
messages are matched only when a code is missing, as in ASG StatusMessage text.
"""

from __future__ import annotations

import re

from spotgpu.controller.observe import FailureReason

_CODES: dict[str, FailureReason] = {
    # AWS (EC2 / Auto Scaling / Fleet)
    "InsufficientInstanceCapacity": FailureReason.CAPACITY,
    "InsufficientCapacity": FailureReason.CAPACITY,
    "UnfulfillableCapacity": FailureReason.CAPACITY,
    "InsufficientHostCapacity": FailureReason.CAPACITY,
    "MaxSpotInstanceCountExceeded": FailureReason.QUOTA,
    "VcpuLimitExceeded": FailureReason.QUOTA,
    "InstanceLimitExceeded": FailureReason.QUOTA,
    "SpotMaxPriceTooLow": FailureReason.PRICE,
    "price-too-low": FailureReason.PRICE,
    # EC2 Fleet Error / Information sub-types (EC2 User Guide, "EC2 Fleet event types"); the
    # others (launchSpecUnusable, fleetProgressHalted, ...) are read from their description.
    "spotInstanceCountLimitExceeded": FailureReason.QUOTA,
    # GCP (MIG errors, last_attempt errors)
    "ZONE_RESOURCE_POOL_EXHAUSTED": FailureReason.CAPACITY,
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": FailureReason.CAPACITY,
    "RESOURCE_POOL_EXHAUSTED": FailureReason.CAPACITY,
    "STOCKOUT": FailureReason.CAPACITY,
    "QUOTA_EXCEEDED": FailureReason.QUOTA,
    # Azure (ARM operation errors, VM instance view)
    "AllocationFailed": FailureReason.CAPACITY,
    "ZonalAllocationFailed": FailureReason.CAPACITY,
    "OverconstrainedAllocationRequest": FailureReason.CAPACITY,
    "OverconstrainedZonalAllocationRequest": FailureReason.CAPACITY,
    "SkuNotAvailable": FailureReason.CAPACITY,
    "SpotPriceGreaterThanProvidedMaxPrice": FailureReason.PRICE,
    "MaxPriceValueInvalid": FailureReason.PRICE,
    "OperationNotAllowed": FailureReason.QUOTA,
    "QuotaExceeded": FailureReason.QUOTA,
    "LowPriorityQuotaExceeded": FailureReason.QUOTA,
    "SpotQuotaExceeded": FailureReason.QUOTA,
}
_CODES_LOWER = {k.lower(): v for k, v in _CODES.items()}

#: Phrases for messages that carry no code (ASG StatusMessage, Azure text); checked in order.
_PHRASES: tuple[tuple[re.Pattern[str], FailureReason], ...] = (
    # "<n> instance(s) are already running. Launching EC2 instance failed.": the regional instance limit.
    (
        re.compile(
            r"max spot instance count exceeded|quota|limit exceeded|vcpu limit|instance\(s\) are already running|"
            r"current instance limit",
            re.I,
        ),
        FailureReason.QUOTA,
    ),
    (re.compile(r"(max(imum)? )?price|bid", re.I), FailureReason.PRICE),
    (re.compile(r"(in)?sufficient .*capacity|not enough .*capacity|no (spot )?capacity|capacity not available|resource pool exhausted|allocation failed", re.I), FailureReason.CAPACITY),
)
_CODE_IN_TEXT = re.compile(r"\b([A-Z][A-Za-z]+(?:Capacity|Exceeded|TooLow|Failed|NotAvailable|Request)|[A-Z_]{8,})\b")


def classify(code: str | None, message: str = "") -> tuple[FailureReason, str]:
    """Return (reason, the code used); unknown codes fall back to message phrases, then OTHER."""
    if code:
        # Azure nests codes as "ProvisioningState/failed/AllocationFailed".
        leaf = code.rsplit("/", 1)[-1]
        found = _CODES.get(leaf) or _CODES_LOWER.get(leaf.lower())
        if found is not None:
            return found, leaf
    for candidate in _CODE_IN_TEXT.findall(message):
        if candidate in _CODES:
            return _CODES[candidate], candidate
    for pattern, reason in _PHRASES:
        if pattern.search(message):
            return reason, code or reason.value
    return FailureReason.OTHER, code or "unknown"
