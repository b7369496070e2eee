"""The event sources are written once (spotgpu.contract.sources): what the components route is what
the controller parses, and the interruption kinds are one vocabulary (spotgpu.contract.interruptions)."""

from __future__ import annotations

import re

from spotgpu.agent.events import InterruptionEvent
from spotgpu.contract.interruptions import LOSS_KINDS, NOTICE_KINDS, OBSERVED_KINDS, InterruptionKind
from spotgpu.contract.sources import (
    AWS_FLEET_INSTANCE_KINDS,
    AWS_GONE_KIND,
    AWS_HEALTH_KIND,
    AZURE_EVENT_KINDS,
    AWS_GONE_STATES,
    AWS_INTERRUPTIONS,
    AWS_LAUNCH_UNSUCCESSFUL,
    AWS_QUEUE,
    AWS_STATE_CHANGE,
    AWS_WATCHED_STATES,
    GCP_INTERRUPTIONS,
)
from spotgpu.controller import plan as controller_plan
from spotgpu.controller.aws import parse_event
from spotgpu.controller.gcp import parse_log_entry
from spotgpu.controller.observe import Dropped, Interruption
from spotgpu_pulumi.aws.controller_job import QUEUE_VISIBILITY_SECONDS
from spotgpu_pulumi.aws.patterns import event_patterns
from spotgpu_pulumi.gcp.plan import preemption_log_filter

AUDIT = "2026-11-30T00:00:00Z"


def _entry(method: str) -> dict[str, object]:
    return {"protoPayload": {"methodName": method, "resourceName": "projects/p/zones/z/instances/pool-spot-x1"},
            "insertId": "i1", "timestamp": AUDIT}  # fmt: skip


def _routed_methods(log_filter: str) -> set[str]:
    term = next(t for t in log_filter.split(" AND ") if t.startswith("protoPayload.methodName="))
    return set(re.findall(r'"([^"]+)"', term))


def test_the_gcp_sink_routes_exactly_the_methods_the_controller_parses() -> None:
    """Defect: the parser also read compute.instances.guestTerminate, which the sink never routed."""
    routed = _routed_methods(preemption_log_filter("proj-1", "pool-dev-spot"))
    parsed = {m for m in (*routed, "compute.instances.guestTerminate") if isinstance(parse_log_entry(_entry(m), 0.0), Interruption)}
    assert routed == parsed == set(GCP_INTERRUPTIONS)


def test_a_guest_shutdown_is_not_an_interruption() -> None:
    assert isinstance(parse_log_entry(_entry("compute.instances.guestTerminate"), 0.0), Dropped)
    event = parse_log_entry(_entry("compute.instances.preempted"), 0.0)
    assert isinstance(event, Interruption) and event.kind == InterruptionKind.PREEMPTED and event.kind in LOSS_KINDS


def test_every_aws_event_the_controller_parses_is_routed_to_the_queue() -> None:
    patterns = event_patterns(["g-spot", "g-fallback"]).values()
    routed = {t for p in patterns for t in p["detail-type"]}
    assert {*AWS_INTERRUPTIONS, AWS_STATE_CHANGE, AWS_LAUNCH_UNSUCCESSFUL} <= routed
    assert set(AWS_GONE_STATES) <= set(AWS_WATCHED_STATES)
    for detail_type, kind in AWS_INTERRUPTIONS.items():
        body = {"detail-type": detail_type, "id": "e1", "time": AUDIT, "detail": {"instance-id": "i-1", "EC2InstanceId": "i-1"}}
        [event] = parse_event(body, 0.0)
        assert getattr(event, "kind", None) == kind


def test_the_queue_the_controller_assumes_is_the_queue_the_component_sets() -> None:
    assert AWS_QUEUE.visibility_timeout_seconds == QUEUE_VISIBILITY_SECONDS


def test_one_vocabulary_of_interruption_kinds() -> None:
    """The agent's events, the controller's adapters and the planner's loss set are the contract's one enum."""
    assert InterruptionEvent.__dataclass_fields__["kind"].type in ("InterruptionKind", InterruptionKind)
    assert {k for k in InterruptionKind if k.terminal} == {InterruptionKind.PREEMPT, InterruptionKind.TERMINATE,
                                                           InterruptionKind.DRAIN}  # fmt: skip
    adapters = {*AWS_INTERRUPTIONS.values(), AWS_GONE_KIND, *AWS_FLEET_INSTANCE_KINDS.values(), AWS_HEALTH_KIND,
                *GCP_INTERRUPTIONS.values(), *AZURE_EVENT_KINDS.values(), InterruptionKind.EVICTED}  # fmt: skip
    assert adapters == OBSERVED_KINDS and LOSS_KINDS <= OBSERVED_KINDS
    assert not NOTICE_KINDS & LOSS_KINDS
    assert controller_plan.LOSS_KINDS is LOSS_KINDS  # the planner imports the contract's set, no copy
