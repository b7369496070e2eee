"""Every published notice payload (tests/agent/published_payloads.py), served from a loopback
endpoint shaped like the real one, through the real agent: the right kind, deadline and
acknowledgement, no error loop, ``ready`` logged, and the source polled at its normal interval.

Issue 36's defects, each a case below: Azure's empty 200 body read as malformed JSON (warnings,
error backoff, no ``ready``); GCP maintenance-event values outside the three the agent knew
looping on "malformed"; the same GCP event twice under value-derived ETags dropped as a
duplicate; MIGRATE given the 1-hour lead; an ISO-8601 ``NotBefore`` unparseable; three
endpoints nobody watched; a past time classed as clock skew.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import published_payloads as pp
import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.daemon import Agent, wire_cloud
from spotgpu.agent.fakes import FakeAwsImds, FakeAzureImds, FakeGcpMetadata, FakeMetadataServer
from spotgpu.agent.telemetry import AgentTelemetry

#: Poll intervals (each provider's floor) and a long error backoff: an error loop then polls
#: at most about once a second, which the poll count below tells apart from the normal rate.
INTERVAL = {"aws": 0.2, "gcp": 0.2, "azure": 0.25}
ERROR_BACKOFF = 1.0
HEARTBEAT = 600  # the lifecycle hook's heartbeat the AWS agent is told


class FakeAutoscaling:
    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []

    def complete_lifecycle_action(self, **kw: str) -> dict[str, object]:
        self.calls.append(kw)
        return {}


@dataclass
class Run:
    fake: Any
    agent: Agent
    log: Path
    asg: FakeAutoscaling

    def records(self, record: str) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [r for r in map(json.loads, lines) if r["record"] == record]

    def notices(self, source: str) -> list[dict[str, Any]]:
        return [r for r in self.records("notice") if r["source"] == source]

    def wait_notices(self, source: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        wait_until(lambda: len(self.notices(source)) >= count, timeout=timeout)
        return self.notices(source)

    def sample(self, name: str, **labels: str) -> float:
        return self.agent.telemetry.registry.get_sample_value(name, labels) or 0.0

    def assert_healthy(self, source: str, path_part: str, provider: str, window: float = 1.2) -> None:
        """No error for the source, ``ready`` logged, and polls at the normal rate over ``window``."""
        wait_until(lambda: any(r.get("stage") == "agent" for r in self.records("ready")), timeout=10)
        before = self.fake.count("GET", path_part)
        time.sleep(window)
        polls = self.fake.count("GET", path_part) - before
        errors = sum(
            s.value
            for m in self.agent.telemetry.registry.collect()
            if m.name == "spotgpu_agent_metadata_errors"
            for s in m.samples
            if s.name.endswith("_total") and s.labels.get("source") == source
        )
        assert errors == 0, f"{source}: {errors} metadata errors"
        # Normal: window / interval polls; an error loop manages about window / ERROR_BACKOFF.
        assert polls >= 0.55 * window / INTERVAL[provider], f"{source}: {polls} polls in {window} s"


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Any]:
    started: list[tuple[FakeMetadataServer, Agent]] = []

    def start(provider: str, served: list[tuple[str, int, str]], **kw: Any) -> Run:
        fake_kw = kw.pop("fake", {})
        fake = {"aws": FakeAwsImds, "gcp": FakeGcpMetadata, "azure": FakeAzureImds}[provider](
            timeout_delay=1.0, **fake_kw
        ).start()
        for path, status, body in served:
            fake.serve(path, status, body)
        runtime = {"error_backoff_seconds": ERROR_BACKOFF, "events_log": None, **kw.pop("runtime", {})}
        if provider == "gcp":
            runtime.setdefault("plain_read_seconds", INTERVAL["gcp"])
        config = fast_config(provider, fake.url, runtime=runtime, **kw)
        log = tmp_path / f"{provider}-{len(started)}.jsonl"
        asg = FakeAutoscaling()
        wiring = wire_cloud(config, lambda: asg) if config.lifecycle_hook else None
        agent = Agent(config, wiring=wiring, telemetry=AgentTelemetry(str(log))).start()
        started.append((fake, agent))
        return Run(fake, agent, log, asg)

    yield start
    for fake, agent in started:
        agent.stop()
        fake.stop()


def aws_hooked() -> dict[str, Any]:
    return {"lifecycle_hook": "drain-hook", "autoscaling_group": "pool-asg", "lifecycle_hook_heartbeat_seconds": HEARTBEAT}


# --- AWS -------------------------------------------------------------------------------------


def test_aws_spot_notice_with_its_published_past_time_is_due_now(run: Any) -> None:
    r = run("aws", [(pp.AWS_INSTANCE_ACTION.path, 200, pp.AWS_INSTANCE_ACTION.body)], **aws_hooked())
    [notice] = r.wait_notices("aws/spot-instance-action")
    assert (notice["kind"], notice["deadlineBasis"]) == ("preempt", "past")
    assert notice["deadline"] == pytest.approx(notice["detectedAt"])
    wait_until(lambda: r.asg.calls)  # the lifecycle hook is completed once the drain is done
    assert len(r.asg.calls) == 1
    r.assert_healthy("aws/spot-instance-action", "instance-action", "aws")


def test_aws_spot_notice_ahead_takes_the_clouds_time(run: Any) -> None:
    at = time.time() + 100
    r = run("aws", [(pp.AWS_INSTANCE_ACTION.path, 200, pp.AWS_INSTANCE_ACTION.dated(at))])
    [notice] = r.wait_notices("aws/spot-instance-action")
    assert (notice["kind"], notice["deadlineBasis"]) == ("preempt", "cloud")
    assert notice["deadline"] == pytest.approx(int(at), abs=1)


def test_aws_rebalance_recommendation(run: Any) -> None:
    r = run("aws", [(pp.AWS_REBALANCE.path, 200, pp.AWS_REBALANCE.body)], **aws_hooked())
    [notice] = r.wait_notices("aws/rebalance-recommendation")
    assert (notice["kind"], notice["deadline"]) == ("rebalance", None)
    r.assert_healthy("aws/rebalance-recommendation", "rebalance", "aws")
    assert r.asg.calls == []


def test_aws_scheduled_reboot_published_is_maintenance_due_now(run: Any) -> None:
    """Defect: events/maintenance/scheduled was not watched at all."""
    r = run("aws", [(pp.AWS_SCHEDULED_REBOOT.path, 200, pp.AWS_SCHEDULED_REBOOT.body)], **aws_hooked())
    [notice] = r.wait_notices("aws/scheduled-events")
    assert (notice["kind"], notice["eventId"]) == ("maintenance", "instance-event-0d59937288b749b32")
    assert notice["deadlineBasis"] == "past" and notice["deadline"] == pytest.approx(notice["detectedAt"])
    r.assert_healthy("aws/scheduled-events", "maintenance/scheduled", "aws")
    assert r.asg.calls == [] and r.agent.state.phase == "early-checkpoint"


def test_aws_scheduled_reboot_weeks_ahead_keeps_its_not_before(run: Any) -> None:
    start = time.time() + 20 * 86400
    body = pp.AWS_SCHEDULED_REBOOT.dated(start, start + 1000)
    r = run("aws", [(pp.AWS_SCHEDULED_REBOOT.path, 200, body)])
    [notice] = r.wait_notices("aws/scheduled-events")
    assert (notice["kind"], notice["deadlineBasis"]) == ("maintenance", "cloud")
    assert notice["deadline"] == pytest.approx(int(start), abs=1)


def test_aws_instance_stop_within_the_horizon_is_terminal_and_not_a_hook_answer(run: Any) -> None:
    """amazon-ec2-metadata-mock's instance-stop, ten minutes out (a one-digit day is kept as written)."""
    start = time.time() + 600
    body = pp.AWS_SCHEDULED_STOP_AEMM.dated(start, start + 7 * 86400, start + 10 * 86400)
    r = run("aws", [(pp.AWS_SCHEDULED_STOP_AEMM.path, 200, body)], **aws_hooked())
    [notice] = r.wait_notices("aws/scheduled-events")
    assert (notice["kind"], notice["eventId"], notice["deadlineBasis"]) == (
        "terminate", "instance-event-1234567890abcdef0", "cloud")  # fmt: skip
    assert notice["deadline"] == pytest.approx(int(start), abs=1)
    wait_until(lambda: r.agent.state.phase == "drained")
    assert r.asg.calls == []  # a scheduled stop has no lifecycle action to complete
    r.assert_healthy("aws/scheduled-events", "maintenance/scheduled", "aws")


def test_aws_instance_stop_days_ahead_is_first_an_early_notice(run: Any) -> None:
    start = time.time() + 3 * 86400
    body = pp.AWS_SCHEDULED_STOP_AEMM.dated(start, start + 7 * 86400, start + 10 * 86400)
    r = run("aws", [(pp.AWS_SCHEDULED_STOP_AEMM.path, 200, body)])
    [notice] = r.wait_notices("aws/scheduled-events")
    assert (notice["kind"], notice["eventId"]) == ("maintenance", "instance-event-1234567890abcdef0/ahead")
    assert notice["deadline"] == pytest.approx(int(start), abs=1)
    assert r.agent.state.phase == "early-checkpoint"  # keeps working until the horizon


def test_aws_target_lifecycle_terminated_is_terminate_by_the_heartbeat(run: Any) -> None:
    """Defect: autoscaling/target-lifecycle-state (the controller's own scale-in) was not watched."""
    r = run("aws", [(pp.AWS_TARGET_TERMINATED.path, 200, pp.AWS_TARGET_TERMINATED.body)], **aws_hooked())
    [notice] = r.wait_notices("aws/target-lifecycle-state")
    assert (notice["kind"], notice["deadlineBasis"]) == ("terminate", "documented")
    assert notice["deadline"] - notice["detectedAt"] == pytest.approx(HEARTBEAT)
    wait_until(lambda: r.asg.calls)
    assert r.asg.calls == [{"AutoScalingGroupName": "pool-asg", "LifecycleHookName": "drain-hook",
                            "LifecycleActionResult": "CONTINUE", "InstanceId": "i-0123456789abcdef0"}]  # fmt: skip
    r.assert_healthy("aws/target-lifecycle-state", "target-lifecycle-state", "aws")


@pytest.mark.parametrize(
    "payload", [pp.AWS_TARGET_IN_SERVICE, pp.AWS_TARGET_EMPTY, pp.AWS_SCHEDULED_NONE], ids=lambda p: p.name
)
def test_aws_answers_that_mean_no_notice(run: Any, payload: pp.Payload) -> None:
    r = run("aws", [(payload.path, 200, payload.body)])
    source = "aws/scheduled-events" if "scheduled" in payload.path else "aws/target-lifecycle-state"
    r.assert_healthy(source, payload.path.rsplit("/", 1)[-1], "aws")
    assert r.records("notice") == []


# --- GCP -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "lead", "unknown"),
    [
        (pp.GCP_MIGRATE, 60.0, None),
        (pp.GCP_TERMINATE, 3600.0, None),
        (pp.GCP_SHUTDOWN, 60.0, "SHUTDOWN_ON_HOST_MAINTENANCE"),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_gcp_maintenance_values_and_their_documented_leads(
    run: Any, payload: pp.Payload, lead: float, unknown: str | None
) -> None:
    """Defects: MIGRATE got the 1-hour lead; an unknown value looped on 'malformed' and was lost."""
    r = run("gcp", [])
    r.fake.set_value("instance/maintenance-event", payload.body)
    [notice] = r.wait_notices("gcp/maintenance-event")
    assert (notice["kind"], notice["deadlineBasis"]) == ("maintenance", "documented")
    assert notice["deadline"] - notice["detectedAt"] == pytest.approx(lead)
    assert notice.get("unknownValue") == unknown
    if unknown:
        assert r.sample("spotgpu_agent_unknown_values_total", source="gcp/maintenance-event", value=unknown) == 1
    r.assert_healthy("gcp/maintenance-event", "maintenance-event", "gcp")
    assert len(r.notices("gcp/maintenance-event")) == 1  # logged once, though two readers see it


@pytest.mark.parametrize("etag_mode", ["hash", "counter"])
def test_gcp_the_same_maintenance_event_twice_is_two_notices(run: Any, etag_mode: str) -> None:
    """Defect: with ETags derived from the value, a second TERMINATE after NONE was dropped."""
    r = run("gcp", [], fake={"etag_mode": etag_mode})
    r.fake.set_value("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE")
    r.wait_notices("gcp/maintenance-event", count=1)
    r.fake.set_value("instance/maintenance-event", "NONE")
    wait_until(lambda: r.records("notice-cleared"))
    r.fake.set_value("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE")
    first, second = r.wait_notices("gcp/maintenance-event", count=2)
    assert first["eventId"] != second["eventId"]
    assert r.agent.state.phase == "early-checkpoint"  # the second notice is the workload's notice again
    r.assert_healthy("gcp/maintenance-event", "maintenance-event", "gcp")


def test_gcp_preempted(run: Any) -> None:
    r = run("gcp", [])
    r.fake.raise_preempted()
    [notice] = r.wait_notices("gcp/preempted")
    assert (notice["kind"], notice["deadlineBasis"]) == ("preempt", "contract")
    r.assert_healthy("gcp/preempted", "preempted", "gcp")


def test_gcp_upcoming_maintenance_days_ahead(run: Any) -> None:
    """Defect: GCE upcoming-maintenance was not watched."""
    start = time.time() + 5 * 86400
    r = run("gcp", [(pp.GCP_UPCOMING.path, 200, pp.GCP_UPCOMING.dated(start, start + 7200))])
    [notice] = r.wait_notices("gcp/upcoming-maintenance")
    assert (notice["kind"], notice["deadlineBasis"]) == ("maintenance", "cloud")
    assert notice["deadline"] == pytest.approx(int(start), abs=1)
    r.assert_healthy("gcp/upcoming-maintenance", "upcoming-maintenance", "gcp")


def test_gcp_upcoming_maintenance_published_window_is_due_now(run: Any) -> None:
    r = run("gcp", [(pp.GCP_UPCOMING.path, 200, pp.GCP_UPCOMING.body)])
    [notice] = r.wait_notices("gcp/upcoming-maintenance")
    assert (notice["kind"], notice["deadlineBasis"]) == ("maintenance", "past")


@pytest.mark.parametrize("payload", [pp.GCP_UPCOMING_NONE, pp.GCP_UPCOMING_NOT_YET], ids=lambda p: p.name)
def test_gcp_upcoming_maintenance_answers_that_mean_none(run: Any, payload: pp.Payload) -> None:
    r = run("gcp", [(payload.path, payload.status, payload.body)])
    r.assert_healthy("gcp/upcoming-maintenance", "upcoming-maintenance", "gcp")
    assert r.records("notice") == []


# --- Azure -----------------------------------------------------------------------------------


def test_azure_published_preempt_is_due_now_and_approved_once(run: Any) -> None:
    r = run("azure", [(pp.AZURE_PREEMPT.path, 200, pp.AZURE_PREEMPT.body)], runtime={"vm_name": "myspotvm"})
    [notice] = r.wait_notices("azure/scheduledevents")
    assert (notice["kind"], notice["deadlineBasis"]) == ("preempt", "past")
    wait_until(lambda: r.fake.acks["A123BC45-1234-5678-AB90-ABCDEF123456"])
    r.assert_healthy("azure/scheduledevents", "scheduledevents", "azure")
    assert r.fake.acks["A123BC45-1234-5678-AB90-ABCDEF123456"] == 1


def test_azure_preempt_ahead_takes_not_before(run: Any) -> None:
    at = time.time() + 25
    r = run("azure", [(pp.AZURE_PREEMPT.path, 200, pp.AZURE_PREEMPT.dated(at))], runtime={"vm_name": "myspotvm"})
    [notice] = r.wait_notices("azure/scheduledevents")
    assert (notice["kind"], notice["deadlineBasis"]) == ("preempt", "cloud")
    assert notice["deadline"] == pytest.approx(int(at), abs=1)


def test_azure_aks_reboot_capture_is_maintenance_never_approved(run: Any) -> None:
    at = time.time() + 900
    vm = "aks-spotcpu2d2as-24469130-vmss_1"
    r = run("azure", [(pp.AZURE_REBOOT_AKS.path, 200, pp.AZURE_REBOOT_AKS.dated(at))], runtime={"vm_name": vm})
    [notice] = r.wait_notices("azure/scheduledevents")
    assert (notice["kind"], notice["deadlineBasis"]) == ("maintenance", "cloud")
    assert notice["deadline"] == pytest.approx(int(at), abs=1)
    r.assert_healthy("azure/scheduledevents", "scheduledevents", "azure")
    assert sum(r.fake.acks.values()) == 0


def test_azure_empty_200_body_is_no_events(run: Any) -> None:
    """Defect: an idle poll answered 200 with an empty body was malformed JSON: a warning per
    poll, the error backoff, and no ``ready`` until an event arrived."""
    r = run("azure", [(pp.AZURE_EMPTY.path, 200, pp.AZURE_EMPTY.body)])
    r.assert_healthy("azure/scheduledevents", "scheduledevents", "azure")
    assert r.records("notice") == []


def test_azure_empty_body_between_events_still_sees_the_next_preempt(run: Any) -> None:
    r = run("azure", [], fake={"empty_when_idle": True})
    r.assert_healthy("azure/scheduledevents", "scheduledevents", "azure")
    eid = r.fake.raise_event("Preempt", not_before_in=20)
    [notice] = r.wait_notices("azure/scheduledevents")
    assert (notice["kind"], notice["eventId"]) == ("preempt", eid)


def test_azure_iso_not_before_from_the_mock_server_is_read(run: Any) -> None:
    """Defect: an ISO-8601 NotBefore (Microsoft's mock server) was unparseable: acted on at once with 30 s."""
    at = time.time() + 900
    r = run("azure", [(pp.AZURE_FREEZE_MOCK.path, 200, pp.AZURE_FREEZE_MOCK.dated(at))], runtime={"vm_name": "vmss_vm1"})
    [notice] = r.wait_notices("azure/scheduledevents")
    assert (notice["kind"], notice["deadlineBasis"]) == ("maintenance", "cloud")
    assert notice["deadline"] == pytest.approx(int(at), abs=1) and "unparsedTime" not in notice


def test_azure_canceled_event_leaves_an_empty_list(run: Any) -> None:
    r = run("azure", [(pp.AZURE_CANCELED_MOCK.path, 200, pp.AZURE_CANCELED_MOCK.body)], runtime={"vm_name": "vmss_vm1"})
    r.assert_healthy("azure/scheduledevents", "scheduledevents", "azure")
    assert r.records("notice") == []


def test_azure_unknown_event_type_is_terminal_but_never_approved(run: Any) -> None:
    body = pp.AZURE_PREEMPT.dated(time.time() + 60).replace('"Preempt"', '"Hibernate"')  # not a published type
    r = run("azure", [(pp.AZURE_PREEMPT.path, 200, body)], runtime={"vm_name": "myspotvm"})
    [notice] = r.wait_notices("azure/scheduledevents")
    assert (notice["kind"], notice["unknownValue"]) == ("terminate", "Hibernate")
    wait_until(lambda: r.agent.state.phase == "drained")
    r.assert_healthy("azure/scheduledevents", "scheduledevents", "azure")
    assert sum(r.fake.acks.values()) == 0
    assert r.sample("spotgpu_agent_unknown_values_total", source="azure/scheduledevents", value="Hibernate") == 1


def test_every_published_payload_names_its_source() -> None:
    payloads = [v for v in vars(pp).values() if isinstance(v, pp.Payload)]
    assert len(payloads) >= 18
    assert all(len(p.source) > 20 for p in payloads)
    assert len({p.name for p in payloads}) == len(payloads)
