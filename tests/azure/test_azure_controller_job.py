"""The Azure controller job under the mock runtime: a scheduled Container Apps job, in wire form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure_fixtures import pool_args

from spotgpu.controller.config import parse_controller_config
from spotgpu.controller.render import CONFIG_ENV
from spotgpu_pulumi.azure import GpuPool, plan_pool
from spotgpu_pulumi.azure.controller_job import plan_azure_controller_job
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import record
from tests.controller.job_snapshot import check_snapshot

SNAPSHOT = Path(__file__).parent / "snapshots" / "controller_job.json"
JOB_TYPE = "azure-native:app:Job"
ENVIRONMENT = "azure-native:app:ManagedEnvironment"
UAI = "azure-native:managedidentity:UserAssignedIdentity"
JOB = "spotgpu:azure:ControllerJob"


def _one(resources: list[RecordedResource], typ: str, suffix: str = "") -> RecordedResource:
    hits = [r for r in resources if r.type == typ and r.name.endswith(suffix)]
    assert len(hits) == 1, [r.name for r in hits]
    return hits[0]


def _build(**changes: object) -> list[RecordedResource]:
    args = pool_args("prod", **changes)
    return record(lambda: GpuPool(args.spec.name, plan_pool(args)))


@pytest.fixture(scope="module")
def prod() -> list[RecordedResource]:
    return _build()


def test_a_schedule_trigger_with_parallelism_one_as_the_controller_identity(prod: list[RecordedResource]) -> None:
    job = _one(prod, JOB_TYPE).inputs
    assert job["jobName"] == "train-az-prod-ctl" and job["resourceGroupName"] == "ml-prod"
    config = job["configuration"]
    assert config["triggerType"] == "Schedule"
    assert config["scheduleTriggerConfig"] == {"cronExpression": "*/1 * * * *", "parallelism": 1, "replicaCompletionCount": 1}
    assert (config["replicaRetryLimit"], config["replicaTimeout"]) == (0, 60)
    assert job["identity"]["type"] == "UserAssigned"
    controller_identity = _one(prod, UAI, "-controller-identity")
    (identity_id,) = job["identity"]["userAssignedIdentities"]
    assert identity_id.endswith(f"/{UAI}/{controller_identity.name}"), "the controller's identity, not the nodes'"
    environment = _one(prod, ENVIRONMENT)
    assert environment.inputs["environmentName"] == "train-az-prod-ctl-env"
    container = job["template"]["containers"][0]
    assert container["args"] == ["controller", "run", "--once", "--config", f"env:{CONFIG_ENV}"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert set(env) == {CONFIG_ENV, "AZURE_CLIENT_ID"}
    assert env["AZURE_CLIENT_ID"] not in (None, "")
    rendered = parse_controller_config(json.loads(env[CONFIG_ENV]))
    pool = rendered.pools[0]
    assert pool.cloud == "azure" and pool.resource_group_name == "ml-prod"
    roles = [g.role.value for g in pool.groups]
    assert roles == ["same_pool", "alternate_sku", "alternate_sku", "on_demand"]
    assert rendered.state_url.startswith("https://spotgpuprodckpt.blob.core.windows.net/")


def test_a_given_environment_is_used_instead_of_creating_one() -> None:
    given = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/apps/providers/Microsoft.App/managedEnvironments/shared"
    resources = _build(controller={"environmentId": given})
    assert not [r for r in resources if r.type == ENVIRONMENT]
    assert _one(resources, JOB_TYPE).inputs["environmentId"] == given


def test_names_fit_the_container_apps_limit() -> None:
    args = pool_args("prod")
    plan = plan_azure_controller_job(args.spec, "a-very-long-environment", {})  # type: ignore[arg-type]
    assert len(plan.job_name) <= 32 and len(plan.environment_name) <= 32


def test_preview_snapshot_of_the_controller_resources() -> None:
    args = pool_args("prod")
    check_snapshot(record(lambda: GpuPool(args.spec.name, plan_pool(args)), preview=True), JOB, SNAPSHOT)


def test_opting_out_creates_no_job() -> None:
    resources = _build(controller={"enabled": False, "waiver": "an AKS operator grows the fallback"})
    assert not [r for r in resources if r.type in (JOB_TYPE, ENVIRONMENT, JOB)]
