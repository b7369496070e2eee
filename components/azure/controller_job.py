"""``spotgpu:azure:ControllerJob``: the pool's fallback controller as a scheduled Container Apps job.

* A Container Apps job (``Microsoft.App/jobs``) with a ``Schedule`` trigger,
  ``*/N * * * *``, parallelism 1, one completion, no replica retries and a replica
  timeout. It runs as the controller's user-assigned identity (created by
  ``ControllerIdentity``); ``AZURE_CLIENT_ID`` tells ``DefaultAzureCredential``
  which one. The container runs
  ``spotgpu controller run --once --config env:SPOTGPU_CONTROLLER_CONFIG``.
* A Container Apps environment (``Microsoft.App/managedEnvironments``), unless
  ``controller.environmentId`` names an existing one.

Overlapping executions (a slow tick and the next schedule) are made harmless by
the lease in the state store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_azure_native.app as app

from spotgpu import __version__
from spotgpu.controller.render import CONFIG_ENV, config_json, render_controller_config
from spotgpu.models import FallbackLadder, WorkloadProfile
from spotgpu.models.pools import AzurePoolSpec
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:azure:ControllerJob"
COMMAND_ARGS = ["controller", "run", "--once", "--config", f"env:{CONFIG_ENV}"]
#: Container Apps job and environment names: 2-32 lowercase letters, digits and '-'.
MAX_JOB_NAME = 32
DEFAULT_IMAGE = f"ghcr.io/spotgpu/controller:{__version__}"


def _short(name: str, limit: int) -> str:
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: limit - 7].rstrip('-')}-{digest}"


@dataclass(frozen=True)
class AzureControllerJobPlan:
    job_name: str
    environment_name: str
    cron: str
    image: str
    timeout_seconds: int
    tags: dict[str, str]


def plan_azure_controller_job(spec: AzurePoolSpec, environment: str, tags: dict[str, str]) -> AzureControllerJobPlan:
    deploy = spec.controller
    minutes = deploy.schedule_minutes
    return AzureControllerJobPlan(
        job_name=_short(f"{spec.name}-{environment}-ctl", MAX_JOB_NAME),
        environment_name=_short(f"{spec.name}-{environment}-ctl-env", MAX_JOB_NAME),
        cron=f"*/{minutes} * * * *" if minutes < 60 else "0 * * * *",
        image=deploy.image or DEFAULT_IMAGE,
        timeout_seconds=deploy.timeout_seconds,
        tags=tags,
    )


def azure_config_json(
    spec: AzurePoolSpec,
    workload: WorkloadProfile,
    ladder: FallbackLadder,
    *,
    subscription_id: str,
    resource_group: str,
    state_url: str,
    spot_sets: list[str],
    fallback_set: str,
    group_types: Mapping[str, Sequence[str]] | None = None,
    events_queue_url: str | None = None,
) -> str:
    """One scale set per GPU size: the first is the primary, the rest the ``alternate_sku`` rung.

    ``resource_group`` is the resolved name (the spec's may be an Output): call this inside an
    ``apply`` over the subscription id and the group, as the pool does (:func:`azure_config_output`).
    """
    return config_json(
        render_controller_config(
            spec,
            workload,
            ladder,
            state_url=state_url,
            primary_group=spot_sets[0],
            fallback_group=fallback_set,
            alternate_groups=spot_sets[1:],
            cloud={
                "subscriptionId": subscription_id,
                "resourceGroupName": resource_group,
                **({"eventsQueueUrl": events_queue_url} if events_queue_url else {}),
            },
            group_types=group_types,
        )
    )


def azure_config_output(
    spec: AzurePoolSpec,
    workload: WorkloadProfile,
    ladder: FallbackLadder,
    *,
    subscription_id: pulumi.Output[str],
    state_url: str,
    spot_sets: list[str],
    fallback_set: str,
    group_types: Mapping[str, Sequence[str]] | None = None,
    events_queue_url: str | None = None,
) -> pulumi.Output[str]:
    """The controller's config JSON once the subscription id and the resource group's name are known."""
    return pulumi.Output.all(subscription_id, as_input(spec.resource_group_name)).apply(
        lambda known: azure_config_json(
            spec,
            workload,
            ladder,
            subscription_id=known[0],
            resource_group=known[1],
            state_url=state_url,
            spot_sets=spot_sets,
            fallback_set=fallback_set,
            group_types=group_types,
            events_queue_url=events_queue_url,
        )
    )


@dataclass(frozen=True)
class AzureControllerJobArgs:
    spec: AzurePoolSpec
    job: AzureControllerJobPlan
    config: pulumi.Output[str]
    identity_id: pulumi.Output[str]
    identity_client_id: pulumi.Output[str]


class ControllerJob(pulumi.ComponentResource):
    job_name: pulumi.Output[str]
    environment_id: pulumi.Output[str]
    controller_config: pulumi.Output[str]

    def __init__(self, name: str, args: AzureControllerJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec, job = args.spec, args.job
        child = pulumi.ResourceOptions(parent=self)
        environment_id: pulumi.Output[str]
        if spec.controller.environment_id:
            environment_id = pulumi.Output.from_input(spec.controller.environment_id)
        else:
            environment = app.ManagedEnvironment(
                f"{name}-environment",
                environment_name=job.environment_name,
                resource_group_name=as_input(spec.resource_group_name),
                location=spec.location,
                tags=job.tags,
                opts=child,
            )
            environment_id = environment.id
        registries = None
        if job.image.split("/", 1)[0].endswith(".azurecr.io"):
            # Pull from ACR as the controller identity (it needs AcrPull on the registry; docs/azure.md).
            registries = [app.RegistryCredentialsArgs(server=job.image.split("/", 1)[0], identity=args.identity_id)]
        container_job = app.Job(
            f"{name}-job",
            job_name=job.job_name,
            resource_group_name=as_input(spec.resource_group_name),
            location=spec.location,
            environment_id=environment_id,
            identity=app.ManagedServiceIdentityArgs(
                type=app.ManagedServiceIdentityType.USER_ASSIGNED,
                user_assigned_identities=[args.identity_id],
            ),
            configuration=app.JobConfigurationArgs(
                trigger_type=app.TriggerType.SCHEDULE,
                replica_timeout=job.timeout_seconds,
                replica_retry_limit=0,
                schedule_trigger_config=app.JobConfigurationScheduleTriggerConfigArgs(
                    cron_expression=job.cron, parallelism=1, replica_completion_count=1
                ),
                registries=registries,
            ),
            template=app.JobTemplateArgs(
                containers=[
                    app.ContainerArgs(
                        name="controller",
                        image=job.image,
                        args=COMMAND_ARGS,
                        env=[
                            app.EnvironmentVarArgs(name=CONFIG_ENV, value=args.config),
                            app.EnvironmentVarArgs(name="AZURE_CLIENT_ID", value=args.identity_client_id),
                        ],
                        resources=app.ContainerResourcesArgs(cpu=0.5, memory="1Gi"),
                    )
                ]
            ),
            tags=job.tags,
            opts=child,
        )
        self.job_name = container_job.name
        self.environment_id = environment_id
        self.controller_config = args.config
        self.register_outputs(
            {"jobName": self.job_name, "environmentId": environment_id, "controllerConfig": args.config}
        )
