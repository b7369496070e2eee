"""Turn one planned :class:`~spotgpu_pulumi.azure.roles.Grant` into a RoleAssignment (thin)."""

from __future__ import annotations

import pulumi
import pulumi_azure_native.authorization as authorization

from spotgpu_pulumi.azure.roles import Grant


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
        scope=subscription_id.apply(grant.scope.render),
        description=f"spotgpu: {grant.key}",
        opts=opts,
    )
