"""The event sources are written once (spotgpu.contract.sources): what the components route is what
the controller parses, and the interruption kinds are one vocabulary (spotgpu.contract.interruptions)."""

from __future__ import annotations

import re

import published_events

from spotgpu.agent.events import InterruptionEvent
from spotgpu.contract.interruptions import LOSS_KINDS, NOTICE_KINDS, OBSERVED_KINDS, InterruptionKind
from spotgpu.contract.sources import (
    AWS_FLEET_INSTANCE_KINDS,
    AWS_GONE_KIND,
    AWS_GONE_STATES,
    AWS_HEALTH_KIND,
    AWS_INTERRUPTIONS,
    AWS_LAUNCH_UNSUCCESSFUL,
    AWS_QUEUE,
    AWS_ROUTED,
    AWS_STATE_CHANGE,
    AWS_WATCHED_STATES,
    AZURE_EVENT_KINDS,
    AZURE_ROUTED,
    GCP_INTERRUPTIONS,
    DropReason,
)
from spotgpu.controller import reconcile as controller_reconcile
from spotgpu.controller.aws import parse_event, parsed_branches
from spotgpu.controller.azure import parse_scheduled_event
from spotgpu.controller.gcp import parse_log_entry
from spotgpu.controller.observe import Dropped, Interruption
from spotgpu_pulumi.aws.controller_job import QUEUE_VISIBILITY_SECONDS
from spotgpu_pulumi.aws.patterns import event_patterns, fleet_pattern
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
    assert controller_reconcile.LOSS_KINDS is LOSS_KINDS  # the planner imports the contract's set, no copy


# --- issue 36: the controller parses everything it routes, in both directions ---------------------

FLEET_ARN = "arn:aws:ec2:us-east-1:123456789012:fleet/fleet-8becf5fe-bb9e-415d-8f54-3fa5a8628b91"


def _aws_patterns() -> list[dict[str, object]]:
    return [*event_patterns(["g-spot", "g-fallback"]).values(), fleet_pattern(FLEET_ARN)]


def routing_gaps(patterns: list[dict[str, object]]) -> list[str]:
    """Every way the rules and the parser disagree: a routed shape with no parser branch or no
    published sample the parser turns into an observation, a parser branch no rule routes."""
    routed = {(src, dt) for p in patterns for src in p["source"] for dt in p["detail-type"]}  # type: ignore[attr-defined]
    gaps = [f"routed, not in the parser's table: {src} {dt}" for src, dt in sorted(routed - set(AWS_ROUTED))]
    gaps += [f"parsed, routed by no rule: {src} {dt}" for src, dt in sorted(set(AWS_ROUTED) - routed)]
    gaps += [f"a branch no route uses: {b}" for b in sorted(parsed_branches() ^ set(AWS_ROUTED.values()))]
    for src, dt in sorted(routed):
        samples = [c.body for c in published_events.AWS if (c.body["source"], c.body["detail-type"]) == (src, dt)]
        if not any(not isinstance(p, Dropped) for body in samples for p in parse_event(body, 0.0)):
            gaps.append(f"no published sample of {src} {dt} becomes an observation")
    for p in patterns:
        detail = p.get("detail") or {}
        for state in detail.get("state", []):  # type: ignore[attr-defined]
            body = {"source": "aws.ec2", "detail-type": AWS_STATE_CHANGE, "id": "s", "time": AUDIT,
                    "detail": {"instance-id": "i-1", "state": state}}  # fmt: skip
            if not all(isinstance(x, Interruption) for x in parse_event(body, 0.0)):
                gaps.append(f"routed state {state} is not parsed")
    return gaps


def test_every_aws_shape_a_rule_routes_is_parsed_and_every_parsed_shape_is_routed() -> None:
    """Defect: the fleet rule routed EC2 Fleet Information, Error, Instance Change and State Change
    and parse_event had no branch for them; the old test checked only parsed -> routed."""
    assert routing_gaps(_aws_patterns()) == []


def test_the_routing_check_fails_on_a_shape_the_parser_does_not_handle() -> None:
    """The check above can fail: a rule routing one more detail-type, or a state nobody parses."""
    extra = [*_aws_patterns(), {"source": ["aws.ec2fleet"], "detail-type": ["EC2 Fleet State Change"]}]
    assert routing_gaps(extra) == [
        "routed, not in the parser's table: aws.ec2fleet EC2 Fleet State Change",
        "no published sample of aws.ec2fleet EC2 Fleet State Change becomes an observation",
    ]
    running = [*_aws_patterns(), {"source": ["aws.ec2"], "detail-type": [AWS_STATE_CHANGE], "detail": {"state": ["running"]}}]
    assert routing_gaps(running) == ["routed state running is not parsed"]


def test_the_gcp_sink_and_the_azure_subscription_route_what_the_parsers_read() -> None:
    for case in published_events.GCP:
        parsed = parse_log_entry(case.body, 0.0)
        method = case.body["protoPayload"]["methodName"]
        assert isinstance(parsed, Interruption) == (method in GCP_INTERRUPTIONS), case.name
    for event_type in AZURE_ROUTED:  # what the component's subscription includes (tests/azure checks the wire)
        samples = [c for c in published_events.AZURE if c.body["eventType"] == event_type]
        assert any(isinstance(p, Interruption) for c in samples for p in parse_scheduled_event(c.body, 0.0))
    [other] = parse_scheduled_event({"eventType": "Microsoft.Resources.ResourceWriteSuccess", "data": {}}, 0.0)
    assert isinstance(other, Dropped) and other.reason == DropReason.UNKNOWN_SHAPE


def _spoiled(body: object) -> list[object]:
    """``body`` with each field in turn replaced by a value of another type."""
    out: list[object] = []
    if isinstance(body, dict):
        for key, value in body.items():
            for junk in (None, 7, "x", [], {"k": 1}):
                if junk != value:
                    out.append({**body, key: junk})
            out += [{**body, key: spoiled} for spoiled in _spoiled(value)]
    elif isinstance(body, list):
        out += [[*body[:i], spoiled, *body[i + 1:]] for i, item in enumerate(body) for spoiled in _spoiled(item)]
    return out


def test_no_published_shape_spoiled_field_by_field_crashes_a_parser() -> None:
    """A field of the wrong type is a counted drop (or still an observation), never an exception that
    would fail the whole pool's tick."""
    for case in published_events.AWS:
        for body in _spoiled(case.body):
            assert all(hasattr(p, "__dataclass_fields__") for p in parse_event(body, 0.0))
    for case in published_events.GCP:
        for body in _spoiled(case.body):
            assert hasattr(parse_log_entry(body, 0.0), "__dataclass_fields__")
    for case in published_events.AZURE:
        for body in _spoiled(case.body):
            assert all(hasattr(p, "__dataclass_fields__") for p in parse_scheduled_event(body, 0.0))
