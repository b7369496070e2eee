"""The pool's resource group as an Output: a ResourceGroup of the same program, or a StackReference value.

A plain string is validated (one line naming ``resourceGroupName``, the value and
the fix) and keeps every name, GUID and input as before; an Output flows to every
``resourceGroupName``, every role scope and the controller's config, while the
planner stays pure and the role GUIDs stay plain strings.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_azure_native.resources as resources
import pytest
from azure_fixtures import pool_args, stack_raw
from google.protobuf import json_format

from spotgpu.config import ConfigError, parse_stack_config
from spotgpu.controller.config import AzureControlledPool, parse_controller_config
from spotgpu.controller.render import CONFIG_ENV
from spotgpu_pulumi.azure import GpuPool, naming
from spotgpu_pulumi.azure.plan import plan_pool
from spotgpu_pulumi.azure.roles import Scope
from spotgpu_pulumi.offline.mocks import UNKNOWN, RecordedResource, RecordingMocks, RecordingMonitor

RG = "ml-team-rg"
RG_TYPE = "azure-native:resources:ResourceGroup"
ASSIGN = "azure-native:authorization:RoleAssignment"
ROLE_DEF = "azure-native:authorization:RoleDefinition"
JOB = "azure-native:app:Job"
SUB = "00000000-0000-0000-0000-000000000000"
#: Inputs that carry a role GUID (the only ones an Output resource group may change).
GUID_INPUTS = {ASSIGN: ("roleAssignmentName", "roleDefinitionId"), ROLE_DEF: ("roleDefinitionId",)}
#: The prod pool's GUIDs for its plain resource group ml-prod, as released: they name live role assignments.
PROD_GUIDS = {
    "pool-blob": "7cd7db2c-bc41-5ade-b64c-fbc215509d5e",
    "controller-blob": "76e6aad4-bb5b-5c64-bfeb-7570459084de",
    "controller-capacity-nc24ads-a100-v4": "82b86069-f2ee-58d0-b8af-5da5df0058f6",
    "controller-capacity-nc48ads-a100-v4": "b727a342-569b-5c26-9d76-e071479dd51e",
    "controller-capacity-nc40ads-h100-v5": "cf8b63ae-7067-5790-8b46-34114d613ac0",
    "controller-capacity-ondemand": "a177d560-dea5-5d8e-956c-069813c9b0b3",
    "controller-member-reader": "fe69d633-5af7-5c21-b735-0c45c7c59263",
    "role-capacity": "cf846919-2c87-5a59-816f-0d67a8ea1552",
    "role-member-reader": "4a0efcae-7521-5e33-b992-725250b1eb8c",
    # publishEventsToEventGrid (issue 36): the Scheduled Events queue's reader and writer
    "controller-events-queue": "d4e3d520-a483-5b2a-93f9-21108f58bc55",
    "eventgrid-events-queue": "52fa6f96-db6b-5e34-9f5b-6b1b743a8a85",
}
DEV_GUIDS = {
    "pool-blob": "890b9c7e-848b-54d1-b36f-f81f91175c16",
    "controller-blob": "7247d09a-d61a-5a4b-a7bc-9994768789b1",
    "controller-capacity-nc4as-t4-v3": "59c5dbe2-b427-5d5b-9694-42b7ff10ec2d",
    "controller-capacity-nc8as-t4-v3": "27b7ff8a-f0c3-5520-9900-073eee52f4cf",
    "controller-capacity-ondemand": "e47651eb-aa14-52e5-9870-55f4518ed30f",
    "controller-member-reader": "2fb76808-885e-56d6-86a9-7617fb7b403c",
    "role-capacity": "6cddc224-7de1-5bb8-8df3-45fb3fb36cb1",
    "role-member-reader": "93129d0d-a547-5fb2-80a4-a8c652dab6d3",
}


class _UnknownGroupMocks(RecordingMocks):
    """A preview in which the new resource group's name is not known yet."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        rid, outputs = super().new_resource(args)
        if args.typ == RG_TYPE:
            outputs["name"] = UNKNOWN
        return rid, outputs


def _run(
    group: Callable[[], Any] | None, *, preview: bool = False, mocks: RecordingMocks | None = None
) -> tuple[list[RecordedResource], dict[str, Any]]:
    """The prod Azure pool; ``group`` makes its resource group inside the program (None: the plain ml-prod)."""
    mocks = mocks or RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="spotgpu", stack="prod", preview=preview, monitor=monitor)
    seen: dict[str, Any] = {}

    def program() -> Any:
        args = pool_args("prod") if group is None else pool_args("prod", resourceGroupName=group())
        pool = GpuPool(args.spec.name, plan_pool(args))
        return pulumi.Output.from_input(pool.exports).apply(seen.update)

    pulumi.runtime.test(program)()
    return monitor.recorded, seen


def _team_group(name: str = RG) -> Callable[[], Any]:
    """A ResourceGroup in the same program; the mocks echo its logical name as its ``name``."""
    return lambda: resources.ResourceGroup(name, resource_group_name=name, location="eastus").name


@pytest.fixture(scope="module")
def from_output() -> tuple[list[RecordedResource], dict[str, Any]]:
    return _run(_team_group())


@pytest.fixture(scope="module")
def plain() -> tuple[list[RecordedResource], dict[str, Any]]:
    """The same pool with the same resource group given as a plain string."""
    return _run(lambda: RG)


def _pool(resources_: list[RecordedResource]) -> list[RecordedResource]:
    return [r for r in resources_ if r.type != RG_TYPE and r.type != "pulumi:pulumi:Stack"]


def _group_urn(resources_: list[RecordedResource]) -> str:
    (group,) = [r for r in resources_ if r.type == RG_TYPE]
    return group.urn


def _guids(resources_: list[RecordedResource]) -> dict[str, str]:
    out = {r.name: r.inputs["roleAssignmentName"] for r in resources_ if r.type == ASSIGN}
    out |= {r.name: r.inputs["roleDefinitionId"] for r in resources_ if r.type == ROLE_DEF}
    return out


def _without_guids(r: RecordedResource) -> str:
    inputs = {k: v for k, v in r.inputs.items() if k not in GUID_INPUTS.get(r.type, ())}
    return json.dumps([r.type, r.name, r.parent, inputs], sort_keys=True)


def test_every_resource_group_name_is_the_resolved_output(from_output: tuple[list[RecordedResource], Any]) -> None:
    recorded, _ = from_output
    group = _group_urn(recorded)
    placed = [r for r in _pool(recorded) if "resourceGroupName" in r.inputs]
    assert sorted({r.type.split(":", 1)[1] for r in placed}) == [
        "app:Job",
        "app:ManagedEnvironment",
        "compute:VirtualMachineScaleSet",
        "eventgrid:SystemTopic",
        "eventgrid:SystemTopicEventSubscription",
        "managedidentity:UserAssignedIdentity",
        "storage:BlobContainer",
        "storage:BlobServiceProperties",
        "storage:ManagementPolicy",
        "storage:Queue",
        "storage:StorageAccount",
    ]
    # identities, storage, 3 spot + 1 fallback scale sets, job + environment, events queue + topic + subscription
    assert len(placed) == 2 + 4 + 4 + 2 + 3
    for r in placed:
        assert r.inputs["resourceGroupName"] == RG, r.name
        # the engine orders every one after the group
        assert group in r.property_dependencies["resourceGroupName"], r.name
    account = next(r for r in placed if r.type == "azure-native:storage:StorageAccount")
    assert account.inputs["accountName"] == "spotgpuprodckpt"


def test_role_scopes_are_rendered_with_the_resolved_name(from_output: tuple[list[RecordedResource], Any]) -> None:
    recorded, _ = from_output
    group = _group_urn(recorded)
    base = f"/subscriptions/{SUB}/resourceGroups/{RG}"
    assignments = {r.name: r for r in recorded if r.type == ASSIGN}
    assert len(assignments) == 9
    for r in assignments.values():
        assert r.inputs["scope"].startswith(base), r.name
        assert group in r.property_dependencies["scope"], r.name
    assert assignments["train-az-checkpoints-pool-blob"].inputs["scope"] == (
        f"{base}/providers/Microsoft.Storage/storageAccounts/spotgpuprodckpt/blobServices/default/containers/checkpoints"
    )
    assert assignments["train-az-controller-member-reader"].inputs["scope"] == base
    capacity = sorted(r.inputs["scope"] for n, r in assignments.items() if "-capacity-" in n)
    assert capacity == sorted(
        f"{base}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"
        for name in (
            "train-az-prod-nc24ads-a100-v4",
            "train-az-prod-nc48ads-a100-v4",
            "train-az-prod-nc40ads-h100-v5",
            "train-az-prod-ondemand",
        )
    )
    definitions = [r for r in recorded if r.type == ROLE_DEF]
    assert len(definitions) == 2
    for r in definitions:
        assert r.inputs["scope"] == base and r.inputs["assignableScopes"] == [base]


def test_the_controller_job_config_and_the_exports_carry_the_resolved_name(
    from_output: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    recorded, exports = from_output
    (job,) = [r for r in recorded if r.type == JOB]
    env = {e["name"]: e["value"] for e in job.inputs["template"]["containers"][0]["env"]}
    config = parse_controller_config(json.loads(env[CONFIG_ENV]))
    (pool,) = config.pools
    assert isinstance(pool, AzureControlledPool)
    assert pool.resource_group_name == RG and pool.subscription_id == SUB
    assert _group_urn(recorded) in job.property_dependencies["template"]
    assert exports["resourceGroup"] == RG
    assert json.loads(exports["controllerConfig"])["pools"][0]["resourceGroupName"] == RG


def test_an_output_changes_nothing_but_the_guids(
    from_output: tuple[list[RecordedResource], Any], plain: tuple[list[RecordedResource], Any]
) -> None:
    """Same logical names (URNs), same inputs (config JSON included) as the plain name; only GUIDs differ."""
    out, given = _pool(from_output[0]), _pool(plain[0])
    assert sorted(r.urn for r in out) == sorted(r.urn for r in given)
    assert sorted(map(_without_guids, out)) == sorted(map(_without_guids, given))
    assert {k: v for k, v in from_output[1].items() if k != "controllerConfig"} == {
        k: v for k, v in plain[1].items() if k != "controllerConfig"
    }


def test_guids_come_from_the_fixed_key_and_stay_distinct(
    from_output: tuple[list[RecordedResource], Any], plain: tuple[list[RecordedResource], Any]
) -> None:
    guids, plain_guids = _guids(from_output[0]), _guids(plain[0])
    assert len(guids) == 11 and len(set(guids.values())) == 11
    # keyed by the storage account, the fixed key, the pool and the environment, never the group's value
    key = ("spotgpuprodckpt", naming.DEFERRED_RESOURCE_GROUP_KEY, "train-az", "prod")
    assert guids["train-az-controller-role-capacity"] == naming.stable_guid(*key, "role", "capacity")
    assert guids["train-az-checkpoints-pool-blob"] == naming.stable_guid(*key, "pool", "blob", "checkpoints")
    # a plain name has its own GUIDs: none is shared with the Output's
    assert not set(guids.values()) & set(plain_guids.values())
    assert plain_guids["train-az-controller-role-capacity"] == naming.stable_guid(
        "spotgpuprodckpt", RG, "train-az", "prod", "role", "capacity"
    )
    # the custom roles are referenced by their (fixed-key) GUIDs
    capacity = next(r for r in from_output[0] if r.name == "train-az-controller-capacity-nc24ads-a100-v4")
    assert capacity.inputs["roleDefinitionId"].endswith(
        f"/roleDefinitions/{guids['train-az-controller-role-capacity']}"
    )


def test_guids_are_stable_whatever_the_output_resolves_to(from_output: tuple[list[RecordedResource], Any]) -> None:
    again, _ = _run(_team_group())
    other, _ = _run(_team_group("another-team-rg"))
    assert _guids(again) == _guids(from_output[0]) == _guids(other)
    assert {r.inputs["resourceGroupName"] for r in _pool(other) if "resourceGroupName" in r.inputs} == {
        "another-team-rg"
    }


def test_role_resources_are_deleted_before_replace_only_for_an_output(
    from_output: tuple[list[RecordedResource], Any], plain: tuple[list[RecordedResource], Any]
) -> None:
    """Switching to an Output replaces them; Azure allows one per principal, role and scope (and role name)."""

    def replace_first(recorded: list[RecordedResource]) -> dict[str, bool]:
        return {r.name: r.request.deleteBeforeReplace for r in _pool(recorded)}

    out, given = replace_first(from_output[0]), replace_first(plain[0])
    roles = {r.name for r in _pool(from_output[0]) if r.type in (ASSIGN, ROLE_DEF)}
    assert len(roles) == 11
    assert {n for n, first in out.items() if first} == roles
    assert not any(given.values())


def test_a_preview_with_an_unknown_name_registers_the_same_static_tree() -> None:
    unknown, _ = _run(_team_group(), preview=True, mocks=_UnknownGroupMocks())
    known, _ = _run(lambda: RG, preview=True)
    assert sorted(r.urn for r in _pool(unknown)) == sorted(r.urn for r in _pool(known))
    account = next(r for r in unknown if r.type == "azure-native:storage:StorageAccount")
    assert account.inputs["resourceGroupName"] == UNKNOWN and account.inputs["accountName"] == "spotgpuprodckpt"
    assignment = next(r for r in unknown if r.name == "train-az-checkpoints-pool-blob")
    assert assignment.inputs["scope"] == UNKNOWN  # rendered once the name is known
    key = ("spotgpuprodckpt", naming.DEFERRED_RESOURCE_GROUP_KEY, "train-az", "prod")
    assert assignment.inputs["roleAssignmentName"] == naming.stable_guid(*key, "pool", "blob", "checkpoints")
    job = next(r for r in unknown if r.type == JOB)
    env = {e["name"]: e.get("value") for e in job.inputs["template"]["containers"][0]["env"]}
    assert env[CONFIG_ENV] == UNKNOWN


def test_the_wire_of_a_plain_name_keeps_its_options(plain: tuple[list[RecordedResource], Any]) -> None:
    """A plain name registers exactly what it did: no option added (deleteBeforeReplace included)."""
    for r in _pool(plain[0]):
        request = json_format.MessageToDict(r.request)
        assert "deleteBeforeReplace" not in request, r.name


# --- pure planning ------------------------------------------------------------------------------------------------


class _Later:
    """A deferred value (not a pulumi Output): ``apply`` hands over the name it resolves to."""

    def __init__(self, name: str) -> None:
        self.name = name

    def apply(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        return func(self.name)


def test_the_planner_passes_the_output_through_without_resolving_it() -> None:
    later = _Later(RG)
    plan = plan_pool(pool_args("prod", resourceGroupName=later))
    spec, roles = plan.spec, plan.roles
    assert spec.resource_group_name is later and plan.resource_group is later
    assert {g.scope.resource_group for g in roles.grants} == {later}
    assert all(g.scope.deferred for g in roles.grants) and all(r.scope.deferred for r in roles.custom_roles)
    reader = next(g for g in roles.grants if g.key == "controller-member-reader")
    assert reader.scope.render(SUB) == f"/subscriptions/{SUB}/resourceGroups/{RG}"  # through the value's apply
    guids = [g.guid for g in roles.grants] + [r.guid for r in roles.custom_roles]
    assert all(isinstance(g, str) for g in guids) and len(set(guids)) == 11
    elsewhere = plan_pool(pool_args("prod", resourceGroupName=_Later("elsewhere"))).roles
    assert [g.guid for g in elsewhere.grants] + [r.guid for r in elsewhere.custom_roles] == guids


@pytest.mark.parametrize(("stack", "expected"), [("prod", PROD_GUIDS), ("dev", DEV_GUIDS)])
def test_a_plain_name_keeps_the_released_guids(stack: str, expected: dict[str, str]) -> None:
    plan = plan_pool(pool_args(stack))
    roles = plan.roles
    assert isinstance(plan.resource_group, str)
    got = {g.key: g.guid for g in roles.grants} | {f"role-{r.key}": r.guid for r in roles.custom_roles}
    assert got == expected
    assert not any(g.scope.deferred for g in roles.grants)
    assert isinstance(Scope("resource-group", plan.resource_group).render(SUB), str)


def test_the_offline_validation_plans_an_output_group() -> None:
    from spotgpu_pulumi.clouds import plan_stack

    raw = copy.deepcopy(stack_raw("prod"))
    next(p for p in raw["pools"] if p["cloud"] == "azure")["resourceGroupName"] = _Later(RG)
    plan_stack(parse_stack_config(raw))  # no ConfigError: nothing waits for the name


# --- plain values are still checked ---------------------------------------------------------------------------------


def _error(value: Any) -> str:
    raw = copy.deepcopy(stack_raw("prod"))
    next(p for p in raw["pools"] if p["cloud"] == "azure")["resourceGroupName"] = value
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw)
    message = str(info.value)
    assert "\n" not in message
    return message


FIX = "fix: name an existing resource group: 1-90 letters, digits, '_', '-', '.', '(' and ')', not ending in '.'"


@pytest.mark.parametrize("bad", ["ml-prod.", "ml prod", "ml/prod", "", "r" * 91, "ml-prod;drop"])
def test_a_bad_plain_name_is_one_line_with_the_key_the_value_and_the_fix(bad: str) -> None:
    message = _error(bad)
    assert message.startswith("spotgpu:pools[train-az].resourceGroupName: ")
    assert f"(value: {json.dumps(bad)[:40]}" in message
    assert message.endswith(FIX)


def test_a_name_that_is_not_a_string_is_refused() -> None:
    message = _error(42)
    assert message.startswith("spotgpu:pools[train-az].resourceGroupName: Input should be a valid string (value: 42)")
    assert message.endswith(FIX)


@pytest.mark.parametrize("good", ["r", "r" * 90, "ML_(prod)-1.x", "ml.prod.team", "équipe-ml"])
def test_every_name_azure_accepts_is_accepted(good: str) -> None:
    args = pool_args("prod", resourceGroupName=good)
    assert args.spec.resource_group_name == good  # type: ignore[union-attr]
