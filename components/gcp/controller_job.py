"""``spotgpu:gcp:ControllerJob``: the pool's fallback controller as a Cloud Run job on a Cloud Scheduler cron.

* A Cloud Run job (v2): one task, parallelism 1, ``maxRetries`` 0, a task timeout,
  running as the pool's controller service account (created by
  ``OnDemandFallbackGroup``). The container runs
  ``spotgpu controller run --once --config env:SPOTGPU_CONTROLLER_CONFIG`` from the
  image ``Dockerfile.controller`` builds.
* A Cloud Scheduler job, ``*/N * * * *``, POSTs the Cloud Run Admin API's
  ``jobs/<name>:run`` with an OAuth token of the same service account, which
  holds ``roles/run.invoker`` on that job only; no retries (the next tick
  supersedes a missed one).

* A wake-up on preemption: an Eventarc trigger on the pool's preemption topic
  starts a small Workflows workflow that POSTs the same ``:run`` endpoint (the Run
  Admin API wants an OAuth access token, which Pub/Sub push cannot send, and
  Workflows' ``http.post`` with ``auth: OAuth2`` does). Eventarc keeps its own
  subscription on the topic; the tick still reads the controller's subscription.

Executions can overlap (a slow tick, the next schedule, a wake-up); the lease in
the state store makes the later ones do nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_gcp import cloudrunv2, cloudscheduler, eventarc, projects, workflows

from spotgpu import __version__
from spotgpu.controller.render import CONFIG_ENV, config_json, render_controller_config
from spotgpu.models import FallbackLadder, WorkloadProfile
from spotgpu.models.pools import GcpPoolSpec

TOKEN = "spotgpu:gcp:ControllerJob"
COMMAND_ARGS = ["controller", "run", "--once", "--config", f"env:{CONFIG_ENV}"]
RUN_API = "https://run.googleapis.com/v2"
PUBSUB_EVENT = "google.cloud.pubsub.topic.v1.messagePublished"


def run_url(project: str, region: str, job: str) -> str:
    return f"{RUN_API}/projects/{project}/locations/{region}/jobs/{job}:run"


def wake_workflow_source(project: str, region: str, job: str) -> str:
    """A one-step workflow: start one execution of the controller job, without waiting for it."""
    return (
        "main:\n"
        "  steps:\n"
        "    - run_controller:\n"
        "        call: http.post\n"
        "        args:\n"
        f"          url: {run_url(project, region, job)}\n"
        "          auth:\n"
        "            type: OAuth2\n"
    )


@dataclass(frozen=True)
class GcpControllerJobPlan:
    job_name: str
    scheduler_name: str
    schedule: str
    image: str
    timeout: str
    config: str
    labels: dict[str, str]
    topic: str


def default_image(spec: GcpPoolSpec) -> str:
    """Where docs/gcp.md pushes the image ``Dockerfile.controller`` builds (Artifact Registry, the pool's region)."""
    return f"{spec.region}-docker.pkg.dev/{spec.project}/spotgpu/controller:{__version__}"


def plan_gcp_controller_job(
    spec: GcpPoolSpec,
    workload: WorkloadProfile,
    ladder: FallbackLadder,
    *,
    base_name: str,
    state_url: str,
    spot_migs: list[str],
    fallback_mig: str,
    subscription: str,
    topic: str,
    labels: dict[str, str],
    group_types: Mapping[str, Sequence[str]] | None = None,
) -> GcpControllerJobPlan:
    deploy = spec.controller
    config = render_controller_config(
        spec,
        workload,
        ladder,
        state_url=state_url,
        primary_group=spot_migs[0],
        fallback_group=fallback_mig,
        alternate_groups=spot_migs[1:],
        cloud={
            "project": spec.project,
            "region": spec.region,
            "subscription": f"projects/{spec.project}/subscriptions/{subscription}",
        },
        group_types=group_types,
    )
    name = f"{base_name}-controller"[:63].rstrip("-")
    return GcpControllerJobPlan(
        job_name=name,
        scheduler_name=name,
        schedule=f"*/{deploy.schedule_minutes} * * * *" if deploy.schedule_minutes < 60 else "0 * * * *",
        image=deploy.image or default_image(spec),
        timeout=f"{deploy.timeout_seconds}s",
        config=config_json(config),
        labels=labels,
        topic=f"projects/{spec.project}/topics/{topic}",
    )


@dataclass(frozen=True)
class ControllerJobArgs:
    spec: GcpPoolSpec
    job: GcpControllerJobPlan
    #: the controller's service account: the job runs as it, the scheduler and the wake-up invoke as it
    service_account_email: pulumi.Input[str]


class ControllerJob(pulumi.ComponentResource):
    job_name: pulumi.Output[str]
    controller_config: str

    def __init__(self, name: str, args: ControllerJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec, job, service_account_email = args.spec, args.job, args.service_account_email
        run_job = cloudrunv2.Job(
            f"{name}-job",
            name=job.job_name,
            project=spec.project,
            location=spec.region,
            labels=job.labels,
            deletion_protection=False,  # the stack owns it; `pulumi destroy` must be able to remove it
            template=cloudrunv2.JobTemplateArgs(
                task_count=1,
                parallelism=1,
                labels=job.labels,
                template=cloudrunv2.JobTemplateTemplateArgs(
                    service_account=service_account_email,
                    max_retries=0,
                    timeout=job.timeout,
                    containers=[
                        cloudrunv2.JobTemplateTemplateContainerArgs(
                            name="controller",
                            image=job.image,
                            args=COMMAND_ARGS,
                            envs=[cloudrunv2.JobTemplateTemplateContainerEnvArgs(name=CONFIG_ENV, value=job.config)],
                            resources=cloudrunv2.JobTemplateTemplateContainerResourcesArgs(
                                limits={"cpu": "1", "memory": "512Mi"}
                            ),
                        )
                    ],
                ),
            ),
            opts=child,
        )
        invoker_member = pulumi.Output.concat("serviceAccount:", service_account_email)
        invoker = cloudrunv2.JobIamMember(
            f"{name}-invoker",
            project=spec.project,
            location=spec.region,
            name=run_job.name,
            role="roles/run.invoker",
            member=invoker_member,
            opts=child,
        )
        cloudscheduler.Job(
            f"{name}-schedule",
            name=job.scheduler_name,
            project=spec.project,
            region=spec.region,
            description=f"spotgpu controller tick for pool {spec.name}",
            schedule=job.schedule,
            time_zone="Etc/UTC",
            attempt_deadline="30s",
            retry_config=cloudscheduler.JobRetryConfigArgs(retry_count=0),
            http_target=cloudscheduler.JobHttpTargetArgs(
                http_method="POST",
                uri=run_job.name.apply(lambda n: run_url(spec.project, spec.region, n)),
                oauth_token=cloudscheduler.JobHttpTargetOauthTokenArgs(
                    service_account_email=service_account_email,
                    scope="https://www.googleapis.com/auth/cloud-platform",
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[invoker]),
        )
        # Wake-up on preemption: topic -> Eventarc -> workflow -> jobs/<name>:run, as the same identity.
        project_roles = [
            projects.IAMMember(f"{name}-{key}", project=spec.project, role=role, member=invoker_member, opts=child)
            for key, role in (("event-receiver", "roles/eventarc.eventReceiver"), ("workflow-invoker", "roles/workflows.invoker"))
        ]
        workflow = workflows.Workflow(
            f"{name}-wake",
            name=f"{job.job_name}-wake",
            project=spec.project,
            region=spec.region,
            description=f"start the spotgpu controller of pool {spec.name} on a preemption",
            service_account=service_account_email,
            source_contents=run_job.name.apply(lambda n: wake_workflow_source(spec.project, spec.region, n)),
            labels=job.labels,
            deletion_protection=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[invoker]),
        )
        eventarc.Trigger(
            f"{name}-on-preemption",
            name=f"{job.job_name}-preempted",
            project=spec.project,
            location=spec.region,
            matching_criterias=[eventarc.TriggerMatchingCriteriaArgs(attribute="type", value=PUBSUB_EVENT)],
            transport=eventarc.TriggerTransportArgs(pubsub=eventarc.TriggerTransportPubsubArgs(topic=job.topic)),
            destination=eventarc.TriggerDestinationArgs(workflow=workflow.id),
            service_account=service_account_email,
            labels=job.labels,
            opts=pulumi.ResourceOptions(parent=self, depends_on=project_roles),
        )
        self.job_name = run_job.name
        self.controller_config = job.config
        self.register_outputs({"jobName": self.job_name, "controllerConfig": job.config})
