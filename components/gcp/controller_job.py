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

Two executions can still overlap (a slow tick and the next schedule); the lease in
the state store makes the second one do nothing. The Pub/Sub subscription is
drained by every tick; it does not start one by itself (see docs/gcp.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import cloudrunv2, cloudscheduler

from spotgpu import __version__
from spotgpu.controller.render import CONFIG_ENV, config_json, render_controller_config
from spotgpu.models import FallbackLadder, WorkloadProfile
from spotgpu.models.pools import GcpPoolSpec

TOKEN = "spotgpu:gcp:ControllerJob"
COMMAND_ARGS = ["controller", "run", "--once", "--config", f"env:{CONFIG_ENV}"]
RUN_API = "https://run.googleapis.com/v2"


@dataclass(frozen=True)
class GcpControllerJobPlan:
    job_name: str
    scheduler_name: str
    schedule: str
    image: str
    timeout: str
    config: str
    labels: dict[str, str]


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
    labels: dict[str, str],
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
    )


class ControllerJob(pulumi.ComponentResource):
    job_name: pulumi.Output[str]
    controller_config: str

    def __init__(
        self,
        name: str,
        *,
        spec: GcpPoolSpec,
        job: GcpControllerJobPlan,
        service_account_email: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
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
                uri=run_job.name.apply(
                    lambda n: f"{RUN_API}/projects/{spec.project}/locations/{spec.region}/jobs/{n}:run"
                ),
                oauth_token=cloudscheduler.JobHttpTargetOauthTokenArgs(
                    service_account_email=service_account_email,
                    scope="https://www.googleapis.com/auth/cloud-platform",
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[invoker]),
        )
        self.job_name = run_job.name
        self.controller_config = job.config
        self.register_outputs({"jobName": self.job_name, "controllerConfig": job.config})
