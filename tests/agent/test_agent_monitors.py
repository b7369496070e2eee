"""Each monitor against its loopback fake, one round at a time, including fault modes."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from spotgpu.agent import aws, azure, gcp
from spotgpu.agent.fakes import imds_date
from spotgpu.agent.http import MetadataError, MetadataHttp
from spotgpu.contract.interruptions import InterruptionKind


def imds(fake: Any, ttl: int = 21600) -> aws.ImdsV2Client:
    return aws.ImdsV2Client(MetadataHttp(fake.url, timeout=0.5), token_ttl_seconds=ttl)


# -- AWS ---------------------------------------------------------------------


def test_aws_no_notice_is_a_404_not_an_error(fakes: Any) -> None:
    fake = fakes("aws")
    assert aws.SpotInterruptionMonitor(imds(fake)).check() == []
    assert aws.RebalanceMonitor(imds(fake)).check() == []


def test_aws_instance_action_becomes_a_preempt_with_the_cloud_deadline(fakes: Any) -> None:
    fake = fakes("aws")
    fake.raise_spot("stop", lead=120)
    [ev] = aws.SpotInterruptionMonitor(imds(fake)).check()
    assert ev.kind is InterruptionKind.PREEMPT
    assert ev.raw == {"action": "stop", "time": fake.instance_action["time"]}
    assert ev.cloud_deadline == pytest.approx(time.time() + 120, abs=2)
    assert ev.published_at == pytest.approx(time.time(), abs=2)


def test_aws_rebalance_recommendation(fakes: Any) -> None:
    fake = fakes("aws")
    fake.raise_rebalance()
    [ev] = aws.RebalanceMonitor(imds(fake)).check()
    assert ev.kind is InterruptionKind.REBALANCE
    assert ev.event_id.startswith("rebalance@")


def test_aws_token_is_reused_then_refetched_after_a_401(fakes: Any) -> None:
    fake = fakes("aws")
    client = imds(fake)
    monitor = aws.SpotInterruptionMonitor(client)
    for _ in range(5):
        monitor.check()
    assert client.token_fetches == 1
    fake.expire_tokens()  # IMDS forgot the token: the next read gets 401
    fake.raise_spot()
    assert monitor.check()[0].kind is InterruptionKind.PREEMPT
    assert client.token_fetches == 2


def test_aws_token_is_refreshed_before_it_expires(fakes: Any) -> None:
    fake = fakes("aws")
    client = imds(fake, ttl=1)
    monitor = aws.SpotInterruptionMonitor(client)
    monitor.check()
    time.sleep(0.8)  # inside the refresh margin (ttl/4), before expiry
    monitor.check()
    assert client.token_fetches == 2
    assert fake.count("PUT", "/latest/api/token") == 2


def test_aws_token_ttl_outside_imds_limits_is_refused(fakes: Any) -> None:
    with pytest.raises(ValueError, match=r"1\.\.21600"):
        imds(fakes("aws"), ttl=0)


@pytest.mark.parametrize(("mode", "reason"), [("500", "http_500"), ("malformed", "malformed"), ("timeout", "timeout")])
def test_aws_faults_raise_metadata_errors_then_recover(fakes: Any, mode: str, reason: str) -> None:
    fake = fakes("aws")
    fake.raise_spot()
    monitor = aws.SpotInterruptionMonitor(imds(fake))
    fake.inject("instance-action", mode)
    with pytest.raises(MetadataError) as err:
        monitor.check()
    assert err.value.reason == reason
    assert monitor.check()[0].kind is InterruptionKind.PREEMPT


def test_aws_token_failure_is_a_metadata_error(fakes: Any) -> None:
    fake = fakes("aws")
    fake.inject("/latest/api/token", "500")
    with pytest.raises(MetadataError, match="token"):
        aws.SpotInterruptionMonitor(imds(fake)).check()


def test_aws_unknown_action_is_still_an_interruption(fakes: Any) -> None:
    """The item exists only for an interruption: an action the agent does not know is a preempt
    (the safest reading) with the value kept, not a malformed answer retried forever (issue 36)."""
    fake = fakes("aws")
    fake.instance_action = {"action": "explode", "time": "2026-01-01T00:00:00Z"}
    [event] = aws.SpotInterruptionMonitor(imds(fake)).check()
    assert (event.kind, event.unknown_value) == (InterruptionKind.PREEMPT, "explode")


def test_aws_identity(fakes: Any) -> None:
    ident = aws.fetch_identity(imds(fakes("aws", life_cycle="on-demand")))
    assert (ident.instance_type, ident.zone, ident.region, ident.capacity) == (
        "g5.xlarge",
        "us-east-1b",
        "us-east-1",
        "on-demand",
    )


# -- GCP ---------------------------------------------------------------------


def gclient(fake: Any) -> gcp.GcpMetadataClient:
    return gcp.GcpMetadataClient(MetadataHttp(fake.url, timeout=0.5))


def test_gcp_first_read_then_hanging_get_returns_on_change(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gclient(fake), timeout_sec=5)
    assert monitor.check() == []  # plain read: FALSE, ETag remembered
    threading.Timer(0.3, fake.raise_preempted).start()
    started = time.monotonic()
    [ev] = monitor.check()
    assert ev.kind is InterruptionKind.PREEMPT
    assert 0.2 < time.monotonic() - started < 1.5  # returned on change, not at timeout_sec
    # The hanging GET answered; the value that counts was then read plainly, in order.
    assert "wait_for_change=true" in fake.requests[-2][2] and "wait_for_change" not in fake.requests[-1][2]


def test_gcp_change_between_requests_is_not_missed(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gclient(fake), timeout_sec=5)
    monitor.check()
    fake.raise_preempted()  # while no request is in flight
    started = time.monotonic()
    assert monitor.check()[0].kind is InterruptionKind.PREEMPT
    assert time.monotonic() - started < 0.5  # last_etag differs: answered at once


def test_gcp_hanging_get_times_out_cleanly(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gclient(fake), timeout_sec=1)
    monitor.check()
    assert monitor.check() == []


def test_gcp_failed_request_keeps_the_etag_so_the_change_is_seen(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gclient(fake), timeout_sec=5)
    monitor.check()
    fake.inject("preempted", "500")
    with pytest.raises(MetadataError):
        monitor.check()
    fake.raise_preempted()
    assert monitor.check()[0].kind is InterruptionKind.PREEMPT


def test_gcp_garbled_value_is_malformed_but_an_unknown_word_is_a_notice(fakes: Any) -> None:
    fake = fakes("gcp")
    fake.set_value("instance/preempted", '{"trunc')
    with pytest.raises(MetadataError, match="unexpected value"):
        gcp.PreemptedMonitor(gclient(fake)).check()
    fake.set_value("instance/preempted", "MAYBE")
    [event] = gcp.PreemptedMonitor(gclient(fake)).check()
    assert (event.kind, event.unknown_value) == (InterruptionKind.PREEMPT, "MAYBE")


def test_gcp_maintenance_event(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.MaintenanceMonitor(gclient(fake), timeout_sec=5)
    assert monitor.check() == []
    fake.set_value("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE")
    [ev] = monitor.check()
    assert ev.kind is InterruptionKind.MAINTENANCE


def test_gcp_requests_carry_the_metadata_flavor_header(fakes: Any) -> None:
    fake = fakes("gcp")
    resp = MetadataHttp(fake.url).request("GET", "/computeMetadata/v1/instance/preempted")
    assert resp.status == 403  # the fake enforces it, so passing tests prove we send it
    assert gclient(fake).text("instance/preempted") == "FALSE"


def test_gcp_identity(fakes: Any) -> None:
    ident = gcp.fetch_identity(gclient(fakes("gcp")))
    assert (ident.instance_type, ident.zone, ident.region, ident.capacity) == (
        "g2-standard-8",
        "us-central1-a",
        "us-central1",
        "spot",
    )


# -- Azure -------------------------------------------------------------------


def az(fake: Any) -> azure.AzureImdsClient:
    return azure.AzureImdsClient(MetadataHttp(fake.url, timeout=0.5))


def test_azure_own_preempt_with_not_before_as_deadline(fakes: Any) -> None:
    fake = fakes("azure")
    monitor = azure.ScheduledEventsMonitor(az(fake))
    assert monitor.check() == []
    eid = fake.raise_event("Preempt", not_before_in=30)
    [ev] = monitor.check()
    assert (ev.event_id, ev.kind, ev.acknowledge_ids) == (eid, InterruptionKind.PREEMPT, (eid,))
    assert ev.cloud_deadline == pytest.approx(time.time() + 30, abs=2)
    assert monitor.vm_name == "gpupool_3"  # matched against IMDS compute.name


def test_azure_event_for_another_vm_is_ignored(fakes: Any) -> None:
    fake = fakes("azure")
    monitor = azure.ScheduledEventsMonitor(az(fake))
    fake.raise_event("Preempt", resources=["gpupool_7"])
    assert monitor.check() == []
    assert monitor.skipped_other_vm == 1


def test_azure_unchanged_incarnation_is_skipped(fakes: Any) -> None:
    fake = fakes("azure")
    monitor = azure.ScheduledEventsMonitor(az(fake))
    fake.raise_event("Terminate", not_before_in=300)
    assert len(monitor.check()) == 1
    assert monitor.check() == []  # same DocumentIncarnation


def test_azure_started_event_is_due_now(fakes: Any) -> None:
    fake = fakes("azure")
    fake.raise_event("Preempt", status="Started")
    [ev] = azure.ScheduledEventsMonitor(az(fake)).check()
    assert ev.cloud_deadline == pytest.approx(ev.detected_at)


def test_azure_malformed_entries_are_skipped_not_fatal(fakes: Any) -> None:
    fake = fakes("azure")
    monitor = azure.ScheduledEventsMonitor(az(fake))
    fake.events.append({"EventId": 7, "EventType": "Preempt"})
    fake.raise_event("Freeze", not_before_in=900)
    [ev] = monitor.check()
    assert ev.kind is InterruptionKind.MAINTENANCE
    assert monitor.skipped_malformed == 1


def test_azure_malformed_document_is_an_error(fakes: Any) -> None:
    fake = fakes("azure")
    fake.inject("scheduledevents", "malformed")
    with pytest.raises(MetadataError):
        azure.ScheduledEventsMonitor(az(fake), vm_name="gpupool_3").check()


def test_azure_first_call_may_take_long_while_the_service_enables(fakes: Any) -> None:
    fake = fakes("azure", timeout_delay=0.8)  # longer than the 0.5 s request timeout
    monitor = azure.ScheduledEventsMonitor(az(fake), vm_name="gpupool_3")
    fake.inject("scheduledevents", "slow")
    assert monitor.check() == []  # waited: the first call gets the long timeout
    fake.inject("scheduledevents", "slow")
    with pytest.raises(MetadataError, match="timed out"):
        monitor.check()  # later calls keep the short one


def test_azure_poll_interval_over_the_rate_limit_is_refused(fakes: Any) -> None:
    with pytest.raises(ValueError, match="5 requests/s"):
        azure.ScheduledEventsMonitor(az(fakes("azure")), interval=0.1)


def test_azure_start_request_approves_and_the_event_disappears(fakes: Any) -> None:
    fake = fakes("azure")
    eid = fake.raise_event("Preempt")
    az(fake).start_events([eid])
    assert fake.acks[eid] == 1
    assert fake.events == []


def test_azure_identity(fakes: Any) -> None:
    ident = azure.fetch_identity(az(fakes("azure", priority="Regular")))
    assert (ident.instance_type, ident.zone, ident.region, ident.capacity, ident.name) == (
        "Standard_NC4as_T4_v3",
        "2",
        "eastus",
        "on-demand",
        "gpupool_3",
    )


# -- issue 36: the new sources against the fakes' own notices -----------------


def test_aws_scheduled_event_from_the_fake_phases_from_early_to_terminal(fakes: Any) -> None:
    fake = fakes("aws")
    monitor = aws.ScheduledEventsMonitor(imds(fake))
    assert monitor.check() == []  # "[]": none
    eid = fake.raise_scheduled("instance-retirement", not_before_in=2 * 86400)
    [early] = monitor.check()
    assert (early.kind, early.event_id) == (InterruptionKind.MAINTENANCE, eid + aws.AHEAD)
    assert early.cloud_deadline == pytest.approx(time.time() + 2 * 86400, abs=2)
    fake.scheduled[0]["NotBefore"] = imds_date(time.time() + 300)  # five minutes out now
    terminal, gone = monitor.check()
    assert (terminal.kind, terminal.event_id) == (InterruptionKind.TERMINATE, eid)  # type: ignore[union-attr]
    assert gone.event_ids == (eid + aws.AHEAD,)  # type: ignore[union-attr]
    fake.scheduled[0]["State"] = "completed"
    [withdrawn] = monitor.check()
    assert withdrawn.event_ids == (eid,)  # type: ignore[union-attr]


def test_aws_target_lifecycle_state_transitions_are_identities(fakes: Any) -> None:
    fake = fakes("aws")
    monitor = aws.TargetLifecycleMonitor(imds(fake), heartbeat_seconds=300)
    assert monitor.check() == []  # InService
    fake.set_lifecycle_state("Terminated")
    [first] = monitor.check()
    assert (first.kind, first.documented_lead) == (InterruptionKind.TERMINATE, 300.0)
    assert monitor.check()[0].event_id == first.event_id  # re-served: the same notice
    fake.set_lifecycle_state("InService")
    assert [w.event_ids for w in monitor.check()] == [(first.event_id,)]  # type: ignore[union-attr]
    fake.set_lifecycle_state("Terminated")
    [second] = monitor.check()
    assert second.event_id != first.event_id
    fake.set_lifecycle_state(None)  # 404: not in a group
    assert [type(x).__name__ for x in monitor.check()] == ["NoticeWithdrawn"]


def test_gcp_upcoming_maintenance_from_the_fake(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.UpcomingMaintenanceMonitor(gclient(fake), every=1.0)
    assert monitor.check() == []  # 503 "no notifications have been received yet"
    fake.set_upcoming_maintenance({"window_start_time": "2030-01-02T03:04:05Z", "type": "SCHEDULED",
                                   "maintenance_status": "PENDING"})  # fmt: skip
    [event] = monitor.check()
    assert (event.kind, event.event_id) == (InterruptionKind.MAINTENANCE, "SCHEDULED@2030-01-02T03:04:05Z")
    fake.set_upcoming_maintenance({"window_start_time": "2030-01-09T03:04:05Z", "type": "SCHEDULED"})
    moved, gone = monitor.check()
    assert gone.event_ids == (event.event_id,)  # type: ignore[union-attr]  # rescheduled: a new notice
    fake.set_upcoming_maintenance(None)
    assert [x.event_ids for x in monitor.check()] == [(moved.event_id,)]  # type: ignore[union-attr]
