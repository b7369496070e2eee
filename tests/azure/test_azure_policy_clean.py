"""The Azure pool passes the project's policy pack; the same resources, weakened, do not."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from azure_fixtures import REPO, pool_args

from spotgpu.contract import tags
from spotgpu_pulumi.azure import GpuPool, plan_pool
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.policy_harness import analyze
from spotgpu_pulumi.offline.testing import record

PACK, CONFIG = REPO / "policies", REPO / "policy-config.json"


@pytest.fixture(scope="module")
def recorded() -> list[RecordedResource]:
    args = pool_args("prod")
    return record(lambda: GpuPool("train-az", plan_pool(args)))


def _weaken(resources: list[RecordedResource], typ: str, change) -> list[RecordedResource]:  # type: ignore[no-untyped-def]
    out = []
    for r in resources:
        if r.type == typ:
            r = copy.copy(r)
            r.inputs = copy.deepcopy(r.inputs)
            r.request = None  # the harness then reads the edited inputs
            change(r.inputs)
        out.append(r)
    return out


def _mandatory(resources: list[RecordedResource]) -> list[dict[str, str]]:
    return [v for v in analyze(resources, Path(PACK), Path(CONFIG)) if v["level"] == "mandatory"]


def test_the_pool_has_no_mandatory_violations(recorded: list[RecordedResource]) -> None:
    assert _mandatory(recorded) == []


def test_shared_key_access_on_the_store_is_caught(recorded: list[RecordedResource]) -> None:
    weak = _weaken(recorded, "azure-native:storage:StorageAccount", lambda i: i.update(allowSharedKeyAccess=True))
    assert any("shared-key" in v["message"] for v in _mandatory(weak))


def test_spot_scale_set_without_its_store_link_is_caught(recorded: list[RecordedResource]) -> None:
    weak = _weaken(
        recorded,
        "azure-native:compute:VirtualMachineScaleSet",
        lambda i: i["tags"].pop(tags.CHECKPOINT_STORE, None),
    )
    assert _mandatory(weak)
