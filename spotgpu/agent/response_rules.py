"""Pure decisions: how much time a notice leaves, and what to do about it.

Kept free of threads and I/O so every rule is tested directly. The responder
(:mod:`spotgpu.agent.responder`) only executes what these functions decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import TypeAdapter

from spotgpu.agent.events import InterruptionEvent
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import Checkpoint
from spotgpu.models.notice import AwsNoticeContract, AzureNoticeContract, GcpNoticeContract, NoticeContract

Contract = AwsNoticeContract | GcpNoticeContract | AzureNoticeContract

#: The longest lead any cloud documents per kind. A cloud deadline beyond it is
#: treated as clock skew, not as a gift of extra time (a source may document its own:
#: ``InterruptionEvent.max_lead``, unbounded for scheduled maintenance).
#: preempt: 120 s (AWS 2-minute notice, GCP 120 s); terminate: Azure terminate
#: notifications are configurable up to 15 min; maintenance: GCP gives GPU VMs 1 h.
MAX_DOCUMENTED_LEAD = {InterruptionKind.PREEMPT: 120.0, InterruptionKind.TERMINATE: 900.0, InterruptionKind.MAINTENANCE: 3600.0}

#: A terminal notice scheduled further out than this (an AWS instance-retirement weeks ahead)
#: is first an early notice (checkpoint early, keep working) and becomes terminal (final
#: checkpoint, drain) only this close to its time: the longest documented terminal lead.
TERMINAL_HORIZON_SECONDS = MAX_DOCUMENTED_LEAD[InterruptionKind.TERMINATE]

#: A cloud deadline this far in the past at detection has passed: the event is due now.
PAST_DEADLINE_TOLERANCE = 2.0

#: Budget of a controller drain whose event carries none (the monitor normally sets it).
DEFAULT_DRAIN_BUDGET = 300.0

_CONTRACT = TypeAdapter(NoticeContract)


def contract_from_config(provider: str, notice: dict[str, object]) -> Contract:
    """Rebuild the pool's notice contract from ``AgentConfig.notice``.

    The bootstrap writes the contract as its model dumps it (camelCase, with the
    ``provider`` discriminator); a dump that omits the provider gets the pool's.
    """
    data = dict(notice)
    data.setdefault("provider", provider)
    if data["provider"] != provider:
        raise ValueError(
            f"notice.provider {data['provider']!r} does not match the agent's provider {provider!r}; "
            "fix: render the bootstrap with the pool's own notice contract"
        )
    return _CONTRACT.validate_python(data)


@dataclass(frozen=True)
class Deadline:
    at: float | None
    #: cloud: the cloud's own timestamp; contract: detection + contract notice
    #: (the cloud gave none); documented: detection + the lead the source documents for this
    #: notice (GCP MIGRATE ~60 s, an ASG lifecycle hook's heartbeat); past: the cloud's time
    #: has passed, so the event is due now; skew: the cloud's timestamp was implausibly far out;
    #: none: no deadline (rebalance); controller: a controller drain, whose
    #: deadline is detection + ``runtime.drainBudgetSeconds`` (set by the drain monitor);
    #: unparseable: the cloud's time could not be read, so detection + the contract's
    #: minimum notice (the shortest safe budget).
    basis: Literal["cloud", "contract", "documented", "past", "skew", "none", "controller", "unparseable"]


def resolve_deadline(event: InterruptionEvent, contract: Contract) -> Deadline:
    """The absolute time the VM should be assumed gone.

    The cloud's timestamp is trusted only within what the cloud documents: a deadline
    further out than the longest documented lead means the VM clock and the cloud's clock
    disagree, and the contract's notice (counted from detection) is used instead. A deadline
    already past is not a clock guess: the event was due to start then, so it is due now
    (an Azure ``NotBefore`` or an AWS scheduled event that has passed is about to start).
    """
    if event.kind is InterruptionKind.REBALANCE:
        return Deadline(None, "none")
    if event.kind is InterruptionKind.DRAIN:
        # No cloud is reclaiming the VM: the budget is ours, set by the drain monitor.
        at = event.cloud_deadline if event.cloud_deadline is not None else event.detected_at + DEFAULT_DRAIN_BUDGET
        return Deadline(max(at, event.detected_at), "controller")
    if event.unparsed_time is not None:
        # The cloud said when, but not readably: assume the least time the contract allows.
        return Deadline(event.detected_at + contract.notice_seconds, "unparseable")
    fallback_lead = contract.notice_seconds if event.kind is InterruptionKind.PREEMPT else MAX_DOCUMENTED_LEAD[event.kind]
    fallback = event.detected_at + fallback_lead
    if event.cloud_deadline is None:
        if event.documented_lead is not None:
            return Deadline(event.detected_at + max(0.0, event.documented_lead), "documented")
        return Deadline(fallback, "contract")
    lead = event.cloud_deadline - event.detected_at
    if lead < -PAST_DEADLINE_TOLERANCE:
        return Deadline(event.detected_at, "past")
    documented = MAX_DOCUMENTED_LEAD[event.kind] if event.max_lead is None else event.max_lead
    max_lead = max(contract.notice_seconds, documented)
    if lead > max_lead + PAST_DEADLINE_TOLERANCE:
        return Deadline(min(fallback, event.detected_at + max_lead), "skew")
    return Deadline(max(event.cloud_deadline, event.detected_at), "cloud")


@dataclass(frozen=True)
class ResponsePlan:
    """What the agent does for one notice."""

    act: bool
    stop_new_work: bool
    checkpoint: Checkpoint | None
    drain: bool
    acknowledge: bool
    why: str


def plan_response(event: InterruptionEvent, contract: Contract) -> ResponsePlan:
    """Map a notice to actions by the pool's contract.

    Rebalance and maintenance are early, unguaranteed signals: stop taking new
    work and checkpoint early, but keep the VM (it may never be reclaimed).
    Preempt and terminate end the VM: final checkpoint within the budget, drain,
    then acknowledge so the cloud can proceed. A controller drain is handled the
    same way but has no cloud event to acknowledge: the controller removes the VM
    once the agent reports the commit.
    """
    if event.kind is InterruptionKind.DRAIN:
        return ResponsePlan(True, True, Checkpoint.FINAL, True, False, "drain: the controller gives this VM back")
    if event.kind.terminal:
        return ResponsePlan(True, True, Checkpoint.FINAL, True, True, f"{event.kind}: the VM is going away")
    if event.kind is InterruptionKind.REBALANCE and isinstance(contract, AwsNoticeContract) and not contract.watch_rebalance:
        return ResponsePlan(False, False, None, False, False, "rebalance ignored: contract has watchRebalance=false")
    return ResponsePlan(True, True, Checkpoint.EARLY, False, False, f"{event.kind}: elevated risk, checkpoint early")
