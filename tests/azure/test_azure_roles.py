"""Role and scope planning: container-only blob access, per-scale-set capacity, read-only members."""

from __future__ import annotations

from spotgpu_pulumi.azure import roles
from spotgpu_pulumi.azure.roles import STORAGE_BLOB_DATA_CONTRIBUTOR, plan_roles

SUB = "11111111-2222-3333-4444-555555555555"
SETS = {
    "nc24ads-a100-v4": "p-prod-nc24ads-a100-v4",
    "nc40ads-h100-v5": "p-prod-nc40ads-h100-v5",
    "ondemand": "p-prod-ondemand",
}


def _plan(**changes: object) -> roles.RolePlan:
    kwargs: dict[str, object] = {
        "pool": "p",
        "environment": "prod",
        "resource_group": "ml-prod",
        "account": "acct1",
        "container": "checkpoints",
        "scale_sets": SETS,
    }
    kwargs.update(changes)
    return plan_roles(**kwargs)  # type: ignore[arg-type]


def test_pool_identity_gets_blob_data_contributor_on_the_container_only() -> None:
    (grant,) = _plan().for_principal("pool")
    assert grant.role == STORAGE_BLOB_DATA_CONTRIBUTOR == "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
    assert grant.custom_role is None
    assert grant.scope.render(SUB) == (
        f"/subscriptions/{SUB}/resourceGroups/ml-prod/providers/Microsoft.Storage/storageAccounts/acct1"
        "/blobServices/default/containers/checkpoints"
    )
    assert grant.role_definition_id(SUB) == (
        f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{STORAGE_BLOB_DATA_CONTRIBUTOR}"
    )


def test_controller_resizes_each_scale_set_at_its_own_scope() -> None:
    plan = _plan()
    capacity = next(r for r in plan.custom_roles if r.key == "capacity")
    assert capacity.actions == (
        "Microsoft.Compute/virtualMachineScaleSets/read",
        "Microsoft.Compute/virtualMachineScaleSets/write",
        "Microsoft.Compute/virtualMachineScaleSets/delete/action",  # deleteInstances of one drained VM
    )
    grants = [g for g in plan.for_principal("controller") if g.custom_role == "capacity"]
    assert sorted(g.scope.render(SUB) for g in grants) == sorted(
        f"/subscriptions/{SUB}/resourceGroups/ml-prod/providers/Microsoft.Compute/virtualMachineScaleSets/{n}"
        for n in SETS.values()
    )
    assert all(g.role == capacity.guid for g in grants)


def test_controller_member_read_is_read_only_at_resource_group() -> None:
    plan = _plan()
    reader = next(r for r in plan.custom_roles if r.key == "member-reader")
    assert all(a.endswith("/read") for a in reader.actions)
    assert "Microsoft.Compute/virtualMachines/read" in reader.actions
    (grant,) = [g for g in plan.for_principal("controller") if g.custom_role == "member-reader"]
    assert grant.scope.render(SUB) == f"/subscriptions/{SUB}/resourceGroups/ml-prod"


def test_no_role_grants_delete_wildcards_or_role_assignment_rights() -> None:
    for role in _plan().custom_roles:
        for action in role.actions:
            # The one delete right is deleteInstances of named VMs, not deleting the scale set (".../delete").
            assert "*" not in action
            assert "delete" not in action.lower() or action == "Microsoft.Compute/virtualMachineScaleSets/delete/action"
            assert not action.startswith("Microsoft.Authorization/")
        assert role.scope.render(SUB) == f"/subscriptions/{SUB}/resourceGroups/ml-prod"


def test_controller_keeps_its_state_in_the_container() -> None:
    blob = [g for g in _plan().for_principal("controller") if g.custom_role is None]
    assert len(blob) == 1 and blob[0].role == STORAGE_BLOB_DATA_CONTRIBUTOR
    assert blob[0].scope.kind == "container"


def test_every_grant_has_a_distinct_deterministic_guid_and_key() -> None:
    a, b = _plan(), _plan()
    assert [g.guid for g in a.grants] == [g.guid for g in b.grants]
    assert len({g.guid for g in a.grants}) == len(a.grants) == 2 + len(SETS) + 1
    assert len({g.key for g in a.grants}) == len(a.grants)
    assert len({r.guid for r in a.custom_roles}) == 2


def test_guids_differ_between_stacks_and_accounts() -> None:
    base = {g.key: g.guid for g in _plan().grants}
    other_env = {g.key: g.guid for g in _plan(environment="dev").grants}
    other_acct = {g.key: g.guid for g in _plan(account="acct2").grants}
    assert not set(base.values()) & set(other_env.values())
    assert not set(base.values()) & set(other_acct.values())


def test_role_names_are_unique_per_pool_environment_and_account() -> None:
    names = {r.role_name for r in _plan().custom_roles}
    assert names.isdisjoint({r.role_name for r in _plan(environment="dev").custom_roles})
    assert all("acct1" in n for n in names)

