"""The GCP controller job under the mock runtime: Cloud Run job + Cloud Scheduler, in wire form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from gcp_fixtures import pool_args

from spotgpu.controller.config import parse_controller_config
from spotgpu.controller.render import CONFIG_ENV
from spotgpu_pulumi.gcp import GpuPool, plan_pool
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import record
from tests.controller.job_snapshot import check_snapshot

SNAPSHOT = Path(__file__).parent / "snapshots" / "controller_job.json"
RUN_JOB = "gcp:cloudrunv2/job:Job"
SCHEDULER = "gcp:cloudscheduler/job:Job"
INVOKER = "gcp:cloudrunv2/jobIamMember:JobIamMember"
JOB = "spotgpu:gcp:ControllerJob"
SA = "gcp:serviceaccount/account:Account"


def _one(resources: list[RecordedResource], typ: str, suffix: str = "") -> RecordedResource:
    hits = [r for r in resources if r.type == typ and r.name.endswith(suffix)]
    assert len(hits) == 1, [r.name for r in hits]
    return hits[0]


@pytest.fixture(scope="module")
def prod() -> list[RecordedResource]:
    args = pool_args("prod")
    return record(lambda: GpuPool(args.spec.name, plan_pool(args)))


def _controller_email(resources: list[RecordedResource]) -> str:
    account = _one(resources, SA, "-fallback-controller")
    return f"{account.inputs['accountId']}@project.iam.gserviceaccount.com"


def test_one_task_no_retries_as_the_controller_service_account(prod: list[RecordedResource]) -> None:
    job = _one(prod, RUN_JOB).inputs
    assert job["name"] == "train-gcp-prod-controller" and job["location"] == "us-central1"
    assert (job["template"]["taskCount"], job["template"]["parallelism"]) == (1, 1)
    task = job["template"]["template"]
    assert task["maxRetries"] == 0 and task["timeout"] == "60s"
    assert task["serviceAccount"] == _controller_email(prod)
    container = task["containers"][0]
    assert container["args"] == ["controller", "run", "--once", "--config", f"env:{CONFIG_ENV}"]
    assert container["image"] == "us-central1-docker.pkg.dev/ml-prod-654321/spotgpu/controller:0.1.0"
    env = {e["name"]: e["value"] for e in container["envs"]}
    config = parse_controller_config(json.loads(env[CONFIG_ENV]))
    pool = config.pools[0]
    assert pool.cloud == "gcp" and pool.subscription == "projects/ml-prod-654321/subscriptions/train-gcp-prod-preempted-ctl"
    assert pool.groups[0].role.value == "same_pool" and pool.groups[-1].role.value == "on_demand"
    assert config.state_url.startswith("gs://") and config.state_url.endswith("/_controller")


def test_cloud_scheduler_runs_the_job_every_minute_with_the_same_identity(prod: list[RecordedResource]) -> None:
    schedule = _one(prod, SCHEDULER).inputs
    assert schedule["schedule"] == "*/1 * * * *" and schedule["timeZone"] == "Etc/UTC"
    assert schedule["retryConfig"] == {"retryCount": 0}
    target = schedule["httpTarget"]
    assert target["httpMethod"] == "POST"
    assert target["uri"] == (
        "https://run.googleapis.com/v2/projects/ml-prod-654321/locations/us-central1/jobs/train-gcp-prod-controller:run"
    )
    assert target["oauthToken"]["serviceAccountEmail"] == _controller_email(prod)
    invoker = _one(prod, INVOKER).inputs
    assert invoker["role"] == "roles/run.invoker" and invoker["member"] == f"serviceAccount:{_controller_email(prod)}"


def test_a_preemption_wakes_the_job_through_eventarc_and_a_workflow(prod: list[RecordedResource]) -> None:
    trigger = _one(prod, "gcp:eventarc/trigger:Trigger").inputs
    assert trigger["matchingCriterias"] == [{"attribute": "type", "value": "google.cloud.pubsub.topic.v1.messagePublished"}]
    assert trigger["transport"]["pubsub"]["topic"] == "projects/ml-prod-654321/topics/train-gcp-prod-preempted"
    assert trigger["serviceAccount"] == _controller_email(prod)
    workflow = _one(prod, "gcp:workflows/workflow:Workflow")
    assert trigger["destination"]["workflow"] == f"{workflow.name}-id"
    source = yaml.safe_load(workflow.inputs["sourceContents"])
    step = source["main"]["steps"][0]["run_controller"]
    assert step["call"] == "http.post" and step["args"]["auth"] == {"type": "OAuth2"}
    assert step["args"]["url"].endswith("/jobs/train-gcp-prod-controller:run")
    assert workflow.inputs["serviceAccount"] == _controller_email(prod)
    roles = {r.inputs["role"] for r in prod if r.type == "gcp:projects/iAMMember:IAMMember"
             and r.inputs["member"] == f"serviceAccount:{_controller_email(prod)}"}
    assert {"roles/eventarc.eventReceiver", "roles/workflows.invoker"} <= roles


def test_preview_snapshot_of_the_controller_resources() -> None:
    args = pool_args("prod")
    check_snapshot(record(lambda: GpuPool(args.spec.name, plan_pool(args)), preview=True), JOB, SNAPSHOT)


def test_opting_out_creates_no_job() -> None:
    args = pool_args("prod", controller={"enabled": False, "waiver": "a Kueue controller grows the fallback"})
    resources = record(lambda: GpuPool(args.spec.name, plan_pool(args)))
    assert not [r for r in resources if r.type in (RUN_JOB, SCHEDULER, JOB)]
