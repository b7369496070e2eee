"""Deterministic Azure names within ARM limits."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spotgpu_pulumi.azure import naming

POOL = st.from_regex(r"[a-z][a-z0-9-]{1,18}[a-z0-9]", fullmatch=True)
ENV = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True)
SIZE = st.from_regex(r"Standard_N[CDVG][0-9]{1,3}[a-z]{0,6}(_[A-Z][0-9]{2,3}){0,1}(_v[0-9])?", fullmatch=True)


def test_size_key_is_lowercase_without_standard_prefix() -> None:
    assert naming.size_key("Standard_NC24ads_A100_v4") == "nc24ads-a100-v4"
    assert naming.size_key("Standard_NC4as_T4_v3") == "nc4as-t4-v3"


@pytest.mark.parametrize("bad", ["NC24ads_A100_v4", "standard_nc24", "Standard_", "Standard_NC24 ads"])
def test_size_key_rejects_non_arm_size_names(bad: str) -> None:
    with pytest.raises(ValueError, match="not an Azure size name"):
        naming.size_key(bad)


def test_scale_set_names_are_readable_and_stable() -> None:
    assert naming.scale_set_name("train-az", "prod", "Standard_NC24ads_A100_v4") == "train-az-prod-nc24ads-a100-v4"
    assert naming.fallback_scale_set_name("train-az", "prod") == "train-az-prod-ondemand"


@given(POOL, ENV, SIZE)
def test_scale_set_names_leave_room_for_the_flexible_vm_suffix(pool: str, env: str, size: str) -> None:
    name = naming.scale_set_name(pool, env, size)
    assert len(name) <= naming.MAX_SCALE_SET_NAME
    assert len(name + "_1a2b3c4d") <= 64  # Flexible member VM name: {scale-set}_{8 chars}, Linux limit 64
    assert name[0].isalnum() and name[-1].isalnum()
    assert name == naming.scale_set_name(pool, env, size)


def test_long_names_are_cut_with_a_hash_and_stay_distinct() -> None:
    pool, env = "a" * 20, "b" * 16
    one = naming.scale_set_name(pool, env, "Standard_ND96isrf_H100_Preview_v5")
    two = naming.scale_set_name(pool, env, "Standard_ND96isrf_H200_Preview_v5")
    assert len(one) == naming.MAX_SCALE_SET_NAME and len(two) == naming.MAX_SCALE_SET_NAME
    assert one != two


@given(POOL, SIZE, st.sampled_from(["spot", "on-demand"]))
def test_computer_name_prefix_fits_15_chars_and_starts_with_a_letter(pool: str, size: str, kind: str) -> None:
    prefix = naming.computer_name_prefix(pool, size, kind)
    assert 1 <= len(prefix) <= 15
    assert prefix[0].isalpha() and prefix.isalnum()


def test_computer_name_prefix_separates_sizes_and_capacity_types() -> None:
    a = naming.computer_name_prefix("train-az", "Standard_NC24ads_A100_v4", "spot")
    b = naming.computer_name_prefix("train-az", "Standard_NC48ads_A100_v4", "spot")
    c = naming.computer_name_prefix("train-az", "Standard_NC24ads_A100_v4", "on-demand")
    assert len({a, b, c}) == 3
    assert a.startswith("trainaz")


def test_checkpoint_store_url_form() -> None:
    assert naming.checkpoint_store_url("acct", "checkpoints", "/train/") == "az://acct/checkpoints/train"


@pytest.mark.parametrize("ok", ["spotgpuprodckpt", "abc", "a" * 24, "loginlater1"[5:] + "x1"])
def test_valid_storage_account_names_pass(ok: str) -> None:
    assert naming.storage_account_problem(ok) is None


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("ab", "3-24 lowercase"),
        ("a" * 25, "3-24 lowercase"),
        ("Spotgpu", "3-24 lowercase"),
        ("spot-gpu", "3-24 lowercase"),
        ("mymicrosoftckpt", "reserved word 'microsoft'"),
        ("windowsckpt", "reserved word 'windows'"),
        ("azure", "reserved word 'azure'"),
        ("xbox", "reserved word 'xbox'"),
        ("loginckpt", "reserved word 'login'"),
    ],
)
def test_storage_account_names_azure_rejects_are_errors(bad: str, match: str) -> None:
    problem = naming.storage_account_problem(bad)
    assert problem is not None and problem.at == "storageAccountName" and problem.value == bad
    assert match in f"{problem.what}; {problem.fix}"


def test_reserved_whole_word_is_fine_inside_a_longer_name() -> None:
    assert naming.storage_account_problem("azureckpt1") is None
    assert naming.storage_account_problem("ckptlogin") is None


def test_stable_guid_is_a_deterministic_uuid() -> None:
    a = naming.stable_guid("acct", "rg", "pool", "blob")
    assert a == naming.stable_guid("acct", "rg", "pool", "blob")
    assert a != naming.stable_guid("acct", "rg", "pool", "capacity")
    assert uuid.UUID(a).version == 5


def test_container_scope_is_the_arm_container_id() -> None:
    assert naming.container_resource_id("sub", "rg", "acct", "checkpoints") == (
        "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct"
        "/blobServices/default/containers/checkpoints"
    )
