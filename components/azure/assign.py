"""Turn one planned :class:`~spotgpu_pulumi.azure.roles.Grant` into a RoleAssignment (thin)."""

from __future__ import annotations

import pulumi
import pulumi_azure_native.authorization as authorization

from spotgpu_pulumi.azure.roles import Grant, Scope
from spotgpu_pulumi.inputs import as_input


def scope_id(scope: Scope, subscription_id: pulumi.Output[str]) -> pulumi.Output[str]:
    """The scope's ARM id once the subscription id (and, for an Output resource group, its name) is known."""
    return subscription_id.apply(lambda sub: as_input(scope.render(sub)))


def replace_options(scope: Scope, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """``opts``, plus ``delete_before_replace`` when the resource group is an Output.

    Its GUIDs are keyed without the group's name (naming.resource_group_key), so a
    stack that switches from a plain name to an Output replaces its role
    assignments and custom roles; Azure holds one assignment per principal, role
    and scope and one custom role per name, so the old one must go first. A plain
    resource group keeps its options as they were.
    """
    if not scope.deferred:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True))


def assign_role(
    name: str,
    grant: Grant,
    *,
    principal_id: pulumi.Input[str],
    subscription_id: pulumi.Output[str],
    opts: pulumi.ResourceOptions,
) -> authorization.RoleAssignment:
    """A role assignment with a deterministic GUID name at the grant's rendered scope.

    ``principal_type`` is given because a freshly created managed identity may not
    have replicated in Entra ID yet; without it ARM can reject the assignment
    with PrincipalNotFound.
    """
    return authorization.RoleAssignment(
        name,
        role_assignment_name=grant.guid,
        principal_id=principal_id,
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
        role_definition_id=subscription_id.apply(grant.role_definition_id),
        scope=scope_id(grant.scope, subscription_id),
        description=f"spotgpu: {grant.key}",
        opts=replace_options(grant.scope, opts),
    )
