"""Least-privilege role planning for the pool identity and the fallback controller (pure).

Who needs what, and at which scope:

* the **pool identity** (on every VM) writes checkpoints: Storage Blob Data
  Contributor on the pool's checkpoint **container** only, not the account;
* the **controller identity** resizes the pool's scale sets and removes one
  drained VM by name: a custom role with only ``virtualMachineScaleSets/read``,
  ``/write`` and ``/delete/action`` (``deleteInstances``; deleting the scale set
  itself is ``/delete``, which it does not get), assigned on each of the pool's
  scale sets (spot sizes and the on-demand fallback), nothing else;
* it also counts and inspects member VMs. Flexible members are ordinary
  top-level VMs (``Microsoft.Compute/virtualMachines``), not children of the
  scale set, and new ones appear with every scale-out, so no per-VM scope can
  exist ahead of time: a second custom role with only VM *read* actions is
  assigned on the pool's resource group (read-only, no data-plane access);
* and keeps its state record in the container: Storage Blob Data Contributor on
  the container, like the pool identity;
* with ``publishEventsToEventGrid``, it reads and deletes the pool's Scheduled Events
  from their Storage queue (Storage Queue Data Message Processor on that queue), and the
  Event Grid system topic's identity puts them there (Storage Queue Data Message Sender
  on that queue only).

Role definitions are created in the pool's resource group and are assignable
there only (custom roles cannot be assignable at a single-resource scope).
Names are GUIDs derived from stable keys that include the globally unique
storage account name, so re-running a stack never duplicates an assignment.

The resource group may be an Output (a ``ResourceGroup`` of the same program, a
``StackReference`` value): planning stays pure and the GUIDs stay plain strings,
keyed by :data:`~spotgpu_pulumi.azure.naming.DEFERRED_RESOURCE_GROUP_KEY` in the
group's place (:func:`~spotgpu_pulumi.azure.naming.resource_group_key`); only the
scopes wait for the name (:meth:`Scope.render` returns an Output).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spotgpu.models.refs import Ref, is_deferred
from spotgpu_pulumi.azure import naming

STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
STORAGE_QUEUE_DATA_MESSAGE_PROCESSOR = "8a0f0c08-91a1-4084-bc3d-661d67233fed"
STORAGE_QUEUE_DATA_MESSAGE_SENDER = "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a"

SCALE_SET_CAPACITY_ACTIONS = (
    "Microsoft.Compute/virtualMachineScaleSets/read",
    "Microsoft.Compute/virtualMachineScaleSets/write",
    # deleteInstances: remove one drained VM by name, never letting the scale-in policy pick a victim.
    "Microsoft.Compute/virtualMachineScaleSets/delete/action",
)
MEMBER_READ_ACTIONS = (
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/instanceView/read",
    "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read",
)

ScopeKind = Literal["container", "queue", "scale-set", "resource-group"]
#: ``eventgrid``: the Scheduled Events system topic's own identity (it delivers to the queue).
Principal = Literal["pool", "controller", "eventgrid"]
#: Who gets what on the Scheduled Events queue: the controller reads and deletes, the topic writes.
_QUEUE_GRANTS: tuple[tuple[Principal, str], ...] = (
    ("controller", STORAGE_QUEUE_DATA_MESSAGE_PROCESSOR),
    ("eventgrid", STORAGE_QUEUE_DATA_MESSAGE_SENDER),
)


@dataclass(frozen=True)
class Scope:
    """Where a role applies; rendered once the subscription id is known.

    ``resource_group`` is the group's name, or an Output of it (:data:`~spotgpu.models.refs.Ref`).
    """

    kind: ScopeKind
    resource_group: Ref
    name: str = ""
    account: str = ""

    @property
    def deferred(self) -> bool:
        """True when the resource group is an Output: the rendered scope is one too."""
        return is_deferred(self.resource_group)

    def render(self, subscription_id: str) -> Ref:
        """The ARM id of the scope: a str for a plain resource group, an Output (its ``apply``) for an Output one."""
        group = self.resource_group
        if isinstance(group, str):
            return self._render(subscription_id, group)
        return group.apply(lambda name: self._render(subscription_id, name))

    def _render(self, subscription_id: str, resource_group: str) -> str:
        if self.kind == "container":
            return naming.container_resource_id(subscription_id, resource_group, self.account, self.name)
        if self.kind == "queue":
            return naming.queue_resource_id(subscription_id, resource_group, self.account, self.name)
        if self.kind == "scale-set":
            return naming.scale_set_resource_id(subscription_id, resource_group, self.name)
        return naming.resource_group_id(subscription_id, resource_group)


@dataclass(frozen=True)
class CustomRole:
    """A custom role definition, kept in (and assignable within) the pool's resource group."""

    key: str
    role_name: str
    description: str
    actions: tuple[str, ...]
    guid: str
    scope: Scope


@dataclass(frozen=True)
class Grant:
    """One role assignment: ``key`` names the Pulumi child; ``role`` is the role definition GUID.

    ``custom_role`` names the :class:`CustomRole` (by key) the grant needs created
    first, or is None for a built-in role.
    """

    key: str
    principal: Principal
    role: str
    custom_role: str | None
    scope: Scope
    guid: str

    def role_definition_id(self, subscription_id: str) -> str:
        """Subscription-level form, which ARM accepts for built-in and custom roles alike."""
        return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{self.role}"


@dataclass(frozen=True)
class RolePlan:
    custom_roles: tuple[CustomRole, ...]
    grants: tuple[Grant, ...]

    def for_principal(self, principal: Principal) -> tuple[Grant, ...]:
        return tuple(g for g in self.grants if g.principal == principal)


def plan_roles(
    *,
    pool: str,
    environment: str,
    resource_group: Ref,
    account: str,
    container: str,
    scale_sets: dict[str, str],
    events_queue: str | None = None,
) -> RolePlan:
    """Every custom role and role assignment a pool needs, at the narrowest scope that works.

    ``scale_sets`` maps each scale set's stable key (size key, ``ondemand``) to its name (one or more, no
    name twice: the spec holds a size, and the pool's planner refuses two sizes with one scale set name).
    ``resource_group`` may be an Output: the GUIDs then use a fixed key in its place.
    ``events_queue``: the Scheduled Events queue in the pool's account, when events are routed.
    """
    keys = (account, naming.resource_group_key(resource_group), pool, environment)
    rg_scope = Scope("resource-group", resource_group)
    capacity = CustomRole(
        key="capacity",
        role_name=f"spotgpu {environment} {pool} scale-set capacity ({account})",
        description=f"Read, resize and remove drained VMs from the scale sets of spot GPU pool {pool} ({environment}).",
        actions=SCALE_SET_CAPACITY_ACTIONS,
        guid=naming.stable_guid(*keys, "role", "capacity"),
        scope=rg_scope,
    )
    reader = CustomRole(
        key="member-reader",
        role_name=f"spotgpu {environment} {pool} member reader ({account})",
        description=f"Read the VMs of spot GPU pool {pool} ({environment}): Flexible members are top-level VMs.",
        actions=MEMBER_READ_ACTIONS,
        guid=naming.stable_guid(*keys, "role", "member-reader"),
        scope=rg_scope,
    )
    container_scope = Scope("container", resource_group, container, account)
    grants = [
        Grant(
            key=f"{who}-blob",
            principal=who,
            role=STORAGE_BLOB_DATA_CONTRIBUTOR,
            custom_role=None,
            scope=container_scope,
            guid=naming.stable_guid(*keys, who, "blob", container),
        )
        for who in ("pool", "controller")
    ]
    grants += [
        Grant(
            key=f"controller-capacity-{key}",
            principal="controller",
            role=capacity.guid,
            custom_role=capacity.key,
            scope=Scope("scale-set", resource_group, name),
            guid=naming.stable_guid(*keys, "controller", "capacity", name),
        )
        for key, name in scale_sets.items()
    ]
    grants.append(
        Grant(
            key="controller-member-reader",
            principal="controller",
            role=reader.guid,
            custom_role=reader.key,
            scope=rg_scope,
            guid=naming.stable_guid(*keys, "controller", "member-reader"),
        )
    )
    if events_queue is not None:
        queue_scope = Scope("queue", resource_group, events_queue, account)
        grants += [
            Grant(
                key=f"{who}-events-queue",
                principal=who,
                role=role,
                custom_role=None,
                scope=queue_scope,
                guid=naming.stable_guid(*keys, who, "queue", events_queue),
            )
            for who, role in _QUEUE_GRANTS
        ]
    return RolePlan((capacity, reader), tuple(grants))
