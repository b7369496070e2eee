"""``spotgpu:azure:ControllerIdentity``: the fallback controller's identity, least privilege.

The controller walks the ladder: it resizes the pool's spot scale sets and its
on-demand fallback group, counts their VMs, and keeps a state record in the
checkpoint container. It gets exactly that, at the narrowest scopes planned by
:func:`spotgpu_pulumi.azure.roles.plan_roles`, and no built-in Contributor role.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_azure_native.authorization as authorization
import pulumi_azure_native.managedidentity as managedidentity

from spotgpu.models.refs import Ref
from spotgpu_pulumi.azure.assign import assign_role, replace_options, scope_id
from spotgpu_pulumi.azure.roles import RolePlan
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:azure:ControllerIdentity"


@dataclass(frozen=True)
class ControllerIdentityArgs:
    identity_name: str
    #: the resource group's name, or an Output of it
    resource_group: Ref
    location: str
    tags: dict[str, str]
    roles: RolePlan
    subscription_id: pulumi.Output[str]
    #: resources the grants' scopes name (scale sets, container): assign only once they exist
    scoped_resources: Sequence[pulumi.Resource]


class ControllerIdentity(pulumi.ComponentResource):
    """A user-assigned identity plus its custom roles and scoped role assignments."""

    identity: managedidentity.UserAssignedIdentity
    client_id: pulumi.Output[str]
    principal_id: pulumi.Output[str]

    def __init__(self, name: str, args: ControllerIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        self.identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity",
            resource_name_=args.identity_name,
            resource_group_name=as_input(args.resource_group),
            location=args.location,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        definitions: dict[str, authorization.RoleDefinition] = {}
        for role in args.roles.custom_roles:
            scope = scope_id(role.scope, args.subscription_id)
            definitions[role.key] = authorization.RoleDefinition(
                f"{name}-role-{role.key}",
                role_definition_id=role.guid,
                role_name=role.role_name,
                description=role.description,
                role_type="CustomRole",
                scope=scope,
                assignable_scopes=[scope],
                permissions=[authorization.PermissionArgs(actions=list(role.actions))],
                opts=replace_options(role.scope, pulumi.ResourceOptions(parent=self)),
            )
        for grant in args.roles.for_principal("controller"):
            custom = [definitions[grant.custom_role]] if grant.custom_role else []
            assign_role(
                f"{name}-{grant.key.removeprefix('controller-')}",
                grant,
                principal_id=self.identity.principal_id,
                subscription_id=args.subscription_id,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.scoped_resources, *custom]),
            )
        self.client_id = self.identity.client_id
        self.principal_id = self.identity.principal_id
        self.register_outputs({"client_id": self.client_id, "principal_id": self.principal_id})
