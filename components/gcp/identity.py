"""``spotgpu:gcp:NodeIdentity``: the pool VMs' own service account, with only what they need.

Project level: write logs and metrics (the agent's telemetry). Object access is
granted by :class:`CheckpointBucket` on that one bucket, nothing project-wide.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import projects, serviceaccount

TOKEN = "spotgpu:gcp:NodeIdentity"

#: Project roles a pool VM needs; nothing that reads or writes other resources.
NODE_PROJECT_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")


@dataclass(frozen=True)
class NodeIdentityArgs:
    project: str
    account_id: str
    display_name: str


class NodeIdentity(pulumi.ComponentResource):
    email: pulumi.Output[str]
    """The service account the pool's templates run as."""
    member: pulumi.Output[str]
    """``serviceAccount:<email>`` for IAM bindings."""

    def __init__(self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        project = args.project
        account = serviceaccount.Account(
            f"{name}-sa", project=project, account_id=args.account_id, display_name=args.display_name, opts=child
        )
        self.email = account.email
        self.member = account.email.apply(lambda e: f"serviceAccount:{e}")
        for role in NODE_PROJECT_ROLES:
            projects.IAMMember(
                f"{name}-{role.split('/')[1]}", project=project, role=role, member=self.member, opts=child
            )
        self.register_outputs({"email": self.email})
