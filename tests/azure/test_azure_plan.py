"""Pure planning: one scale set per size, capacity split, zones, placement rules, tags."""

from __future__ import annotations

import dataclasses

import pytest
from azure_fixtures import pool_args, spec, stack_raw

from spotgpu.config import ConfigError, PlanError, parse_stack_config
from spotgpu.contract import tags
from spotgpu.models.base import FieldProblem
from spotgpu.models.pools import AzurePriorityMix
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.azure import plan


def _plan(s=None, stack: str = "prod"):  # type: ignore[no-untyped-def]
    args = pool_args(stack)
    return plan.plan_pool(dataclasses.replace(args, spec=s) if s is not None else args)


def test_one_spot_scale_set_per_gpu_size_in_spec_order() -> None:
    p = _plan()
    assert [s.vm_size for s in p.spot] == [
        "Standard_NC24ads_A100_v4",
        "Standard_NC48ads_A100_v4",
        "Standard_NC40ads_H100_v5",
    ]
    assert [s.name for s in p.spot] == [
        "train-az-prod-nc24ads-a100-v4",
        "train-az-prod-nc48ads-a100-v4",
        "train-az-prod-nc40ads-h100-v5",
    ]
    assert len({s.computer_name_prefix for s in p.spot}) == 3


def test_the_primary_scale_set_is_created_with_the_whole_target() -> None:
    """The controller keeps the primary at target and drains other sets' VMs as surplus
    (tests/azure/test_azure_idle_scale_set.py), so the others start empty."""
    assert [s.capacity for s in _plan().spot] == [2, 0, 0]


def test_zones_span_without_strict_balance_and_single_zone_has_no_balance_flag() -> None:
    assert plan.plan_zones(("3", "1", "2")) == plan.ZonePlan(("1", "2", "3"), False)
    assert plan.plan_zones(("2",)) == plan.ZonePlan(("2",), None)


def test_the_spec_refuses_a_zone_twice_and_sizes_of_other_families() -> None:
    """What the models guarantee, the planner does not check again (it checked a zone twice, B-series, D-series)."""
    with pytest.raises(ConfigError, match=r"pools\[train-az\]\.zones: zones \['1', '1', '2'\] lists a zone twice"):
        spec(zones=["1", "1", "2"])
    for size in ("Standard_B2s", "Standard_D8s_v5"):
        with pytest.raises(ConfigError, match=r"vmSizes\[0\]: is a [BD]-series size without GPUs"):
            spec(vmSizes=[size, *spec().vm_sizes], optOut={"catalogue": CATALOGUE_REASON})
    with pytest.raises(ConfigError, match=r"terminateNotificationTimeout: .*fix: use PT5M to PT15M"):
        spec(terminateNotificationTimeout="PT16M")


#: A stated reason to use a size the catalogue does not know: the planner then judges the size by its name.
CATALOGUE_REASON = "launched after the catalogue was made"


@pytest.mark.parametrize(
    ("size", "what"),
    [
        ("Standard_NC24ads_A100_v4_Promo", "is a Promo size, which Azure Spot does not support"),
        ("Standard_NP10s", "is a NP-series size without GPUs"),
        ("nc24", "is not an Azure size name"),
    ],
)
def test_sizes_the_catalogue_does_not_know_are_judged_by_name(size: str, what: str) -> None:
    args = pool_args(vmSizes=[*spec().vm_sizes, size], optOut={"catalogue": CATALOGUE_REASON})
    with pytest.raises(PlanError) as err:
        plan.plan_pool(args)
    assert str(err.value).startswith(f'spotgpu:pools[train-az].vmSizes[3]: {what} (value: "{size}"); fix: ')


def test_same_size_twice_is_rejected_even_with_different_case() -> None:
    with pytest.raises(FieldProblem, match="same size"):
        plan.check_spot_sizes(("Standard_NC24ads_A100_v4", "Standard_NC24ads_a100_v4"))


def test_gpu_families_are_accepted() -> None:
    sizes = plan.check_spot_sizes(
        ("Standard_NC4as_T4_v3", "Standard_ND96asr_v4", "Standard_NV36ads_A10_v5", "Standard_NG32ads_V620_v1")
    )
    assert [s.family for s in sizes] == ["NC", "ND", "NV", "NG"]
    assert sizes[1].vcpus == 96


def test_fault_domain_count_above_one_with_gpu_sizes_is_rejected() -> None:
    with pytest.raises(PlanError, match=r"platformFaultDomainCount: is above 1 with N-series size Standard_NC24ads_A100_v4"):
        _plan(spec(platformFaultDomainCount=2))


def test_priority_mix_with_single_placement_group_is_rejected() -> None:
    s = spec(singlePlacementGroup=True, priorityMix={"baseRegularPriorityCount": 1})
    with pytest.raises(PlanError, match=r"singlePlacementGroup: is true with a priorityMix"):
        _plan(s)


def test_priority_mix_without_single_placement_group_is_planned() -> None:
    s = spec(priorityMix={"baseRegularPriorityCount": 1, "regularPriorityPercentageAboveBase": 20})
    assert s.priority_mix == AzurePriorityMix(base_regular_priority_count=1, regular_priority_percentage_above_base=20)
    assert len(_plan(s).spot) == 3


def test_single_placement_group_caps_capacity_at_100() -> None:
    with pytest.raises(PlanError, match=r"capacity\.max: is above 100 .*at most 100 VMs"):
        _plan(spec(singlePlacementGroup=True, capacity={"target": 2, "max": 101}))
    assert _plan(spec(singlePlacementGroup=True, capacity={"target": 2, "max": 100})).spot


def test_storage_account_reserved_word_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match=r"storageAccountName: contains the reserved word 'microsoft'"):
        _plan(spec(storageAccountName="microsoftckpt"))


def test_storage_account_pattern_is_checked_by_the_spec() -> None:
    with pytest.raises(ValueError, match="storageAccountName"):
        spec(storageAccountName="Bad-Name")


def test_fallback_size_defaults_to_first_size_and_is_checked() -> None:
    p = _plan()
    assert p.fallback.vm_size == "Standard_NC24ads_A100_v4"
    assert p.fallback.capacity == 0 and p.fallback.name == "train-az-prod-ondemand"
    raw = stack_raw("prod")
    raw["workloads"]["llm-finetune"]["prices"]["onDemandPerHour"] = 3.7  # the catalogue prices no Promo size
    raw["pools"] = [{**p, "fallbackVmSize": "Standard_NC24ads_A100_v4_Promo", "optOut": {"catalogue": CATALOGUE_REASON}}
                    for p in raw["pools"] if p["cloud"] == "azure"]  # fmt: skip
    config = parse_stack_config(raw)
    with pytest.raises(PlanError, match=r"pools\[train-az\]\.fallbackVmSize: is a Promo size"):
        plan.plan_pool(PoolArgs.for_pool(config, config.pools[0]))
    h100 = spec(fallbackVmSize="Standard_NC40ads_H100_v5", on_demand_ceiling=8)  # its list price 6.98 is above 5
    assert _plan(h100).fallback.vm_size == "Standard_NC40ads_H100_v5"


def test_spot_tags_carry_every_link_the_policy_pack_reads() -> None:
    args = pool_args()
    p = _plan()
    t = p.spot[0].tags
    assert t[tags.ROLE] == "spot-pool"
    assert t[tags.POOL] == "train-az"
    assert t[tags.CHECKPOINT_STORE] == "az://spotgpuprodckpt/checkpoints/train-az"
    assert t[tags.FALLBACK_GROUP] == p.fallback.name
    assert tags.decode_ladder(t[tags.LADDER])[0].kind == args.ladder.steps[0].kind
    assert tags.decode_workload(t[tags.WORKLOAD])["checkpoint_write_seconds"] == args.workload.checkpoint_write_seconds
    assert t[tags.CHECKPOINT_INTERVAL] == str(args.interval.seconds)
    assert t[tags.NOTICE] == "azure"
    assert t["spotgpu-environment"] == "prod"
    assert all(len(v) <= 256 for v in t.values())


def test_fallback_and_storage_tags_carry_their_roles() -> None:
    p = _plan()
    assert p.fallback.tags[tags.ROLE] == "fallback"
    assert p.fallback.tags[tags.LADDER]
    assert tags.FALLBACK_GROUP not in p.fallback.tags
    assert p.storage.tags[tags.ROLE] == "checkpoint-store"
    assert p.controller_tags[tags.ROLE] == "controller"
    assert tags.ROLE not in p.identity_tags


def test_opt_out_reasons_become_the_waiver_tag() -> None:
    s = spec("dev", zones=["1"], optOut={"singleZone": "dev quota exists in zone 1 only", "idleRungs": "shared ladder"})
    p = _plan(s, stack="dev")
    assert p.spot[0].tags[tags.WAIVER] == "singleZone: dev quota exists in zone 1 only"
    assert p.zones.zone_balance is None


def test_overlong_tag_value_is_rejected() -> None:
    with pytest.raises(FieldProblem, match="makes tag spotgpu-ladder on vmss 257 characters, over Azure's 256"):
        plan.check_tag_values({"spotgpu-ladder": "x" * 257}, "vmss")


def test_storage_plan_follows_checkpoint_spec() -> None:
    prod, dev = _plan().storage, _plan(stack="dev").storage
    assert (prod.protect, dev.protect) == (True, False)  # forceDestroy false protects live checkpoints
    assert prod.version_days == 7 and dev.version_days == 3
    assert prod.sku == "Standard_ZRS"
    assert _plan(spec(checkpoint={"prefix": "teams/llm"})).storage.url == "az://spotgpuprodckpt/checkpoints/teams/llm"


def test_a_pool_of_another_cloud_is_refused_with_its_key_path() -> None:
    """``plan_pool(args)`` is the one Azure planning entry (component, preview edge and registry alike)."""
    from azure_fixtures import stack_raw

    from spotgpu.config import parse_stack_config
    from spotgpu_pulumi.args import PoolArgs

    config = parse_stack_config(stack_raw("prod"))
    gcp = next(p for p in config.pools if p.cloud == "gcp")
    with pytest.raises(PlanError, match=r"spotgpu:pools\[train-gcp\]\.cloud: spotgpu_pulumi.azure.plan_pool plans only Azure pools"):
        plan.plan_pool(PoolArgs.for_pool(config, gcp))
    planned = plan.plan_pool(pool_args("prod"))
    assert planned.pool == planned.spec.name and planned.roles  # the roles are planned with the pool, before any resource
