"""``spotgpu:azure:CheckpointStorage``: the pool's own, private, versioned Blob store.

Checkpoints are the primary protection against eviction, so the store is
hardened: HTTPS and TLS 1.2 only, no public blob access, no shared keys (only
Entra ID tokens, so a leaked key or SAS is useless), versioning plus delete
retention so an overwritten or deleted generation can still be recovered for
N days, and a lifecycle rule that expires those old versions after N days so
they do not pile up. Committed generations themselves are never expired by the
store: the checkpoint library keeps the newest K.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native.storage as storage

from spotgpu.models.refs import Ref
from spotgpu_pulumi.azure.assign import assign_role
from spotgpu_pulumi.azure.plan import StoragePlan
from spotgpu_pulumi.azure.roles import Grant
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:azure:CheckpointStorage"


@dataclass(frozen=True)
class CheckpointStorageArgs:
    plan: StoragePlan
    #: the resource group's name, or an Output of it (a ResourceGroup's name, a StackReference value)
    resource_group: Ref
    location: str
    subscription_id: pulumi.Output[str]
    #: the pool identity's principal id and its container-scoped grant
    writer_principal_id: pulumi.Input[str]
    writer_grant: Grant


def lifecycle_rules(plan: StoragePlan) -> list[storage.ManagementPolicyRuleArgs]:
    """Expire previous versions and snapshots after N days, under this pool's prefix only."""
    days = plan.version_days
    return [
        storage.ManagementPolicyRuleArgs(
            name="expire-previous-versions",
            type=storage.RuleType.LIFECYCLE,
            enabled=True,
            definition=storage.ManagementPolicyDefinitionArgs(
                filters=storage.ManagementPolicyFilterArgs(
                    blob_types=["blockBlob"], prefix_match=[f"{plan.container}/{plan.prefix}/"]
                ),
                actions=storage.ManagementPolicyActionArgs(
                    version=storage.ManagementPolicyVersionArgs(
                        delete=storage.DateAfterCreationArgs(days_after_creation_greater_than=days)
                    ),
                    snapshot=storage.ManagementPolicySnapShotArgs(
                        delete=storage.DateAfterCreationArgs(days_after_creation_greater_than=days)
                    ),
                ),
            ),
        )
    ]


class CheckpointStorage(pulumi.ComponentResource):
    """Storage account + blob service settings + private container + lifecycle + the writer's grant."""

    account_name: pulumi.Output[str]
    """Storage account name (globally unique)."""
    account_id: pulumi.Output[str]
    """Its ARM id (an Event Grid storage-queue destination names the account by id)."""
    container_name: pulumi.Output[str]
    """The private checkpoint container."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        plan = args.plan
        group = as_input(args.resource_group)
        # forceDestroy false: `pulumi destroy` must not take live checkpoints with it.
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect)
        account = storage.StorageAccount(
            f"{name}-account",
            account_name=plan.account,
            resource_group_name=group,
            location=args.location,
            kind=storage.Kind.STORAGE_V2,
            sku=storage.SkuArgs(name=plan.sku),
            access_tier=storage.AccessTier.HOT,
            enable_https_traffic_only=True,
            minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
            allow_blob_public_access=False,
            allow_shared_key_access=False,
            default_to_o_auth_authentication=True,
            allow_cross_tenant_replication=False,
            tags=plan.tags,
            opts=keep,
        )
        on_account = pulumi.ResourceOptions(parent=self, depends_on=[account])
        storage.BlobServiceProperties(
            f"{name}-blob-service",
            account_name=account.name,
            resource_group_name=group,
            blob_services_name="default",
            is_versioning_enabled=True,
            delete_retention_policy=storage.DeleteRetentionPolicyArgs(enabled=True, days=plan.version_days),
            container_delete_retention_policy=storage.DeleteRetentionPolicyArgs(enabled=True, days=plan.version_days),
            opts=on_account,
        )
        container = storage.BlobContainer(
            f"{name}-container",
            account_name=account.name,
            resource_group_name=group,
            container_name=plan.container,
            public_access=storage.PublicAccess.NONE,
            opts=pulumi.ResourceOptions(parent=self, protect=plan.protect, depends_on=[account]),
        )
        storage.ManagementPolicy(
            f"{name}-lifecycle",
            account_name=account.name,
            resource_group_name=group,
            management_policy_name="default",
            policy=storage.ManagementPolicySchemaArgs(rules=lifecycle_rules(plan)),
            opts=on_account,
        )
        assign_role(
            f"{name}-{args.writer_grant.key}",
            args.writer_grant,
            principal_id=args.writer_principal_id,
            subscription_id=args.subscription_id,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[container]),
        )
        self.account_name = account.name
        self.account_id = account.id
        self.container_name = container.name
        self.register_outputs({"account_name": self.account_name, "container_name": self.container_name})
