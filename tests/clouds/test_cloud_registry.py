"""One cloud interface (issue 24, item 2): every cloud is a folder in one registry, planned before it registers.

``deploy``, the preview edge (``plan_all``) and the package provider find a pool's cloud in
``spotgpu_pulumi.clouds.CLOUDS``; a fourth cloud registered here is planned and deployed through
the same path with no edit to ``platform.py`` or ``offline/validate.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pulumi
import pytest
from cloud_fixtures import REPO, SHIPPED, config_with, pool_args, registered_until_failure

from spotgpu.bootstrap import control_store_url
from spotgpu.config import ConfigError
from spotgpu.models import StackConfig
from spotgpu.models.pools import GcpPoolSpec
from spotgpu_pulumi import planning
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import CLOUDS, Cloud
from spotgpu_pulumi.gcp.plan import GcpPlanError
from spotgpu_pulumi.offline.testing import record
from spotgpu_pulumi.offline.validate import plan_all
from spotgpu_pulumi.platform import deploy

TITLES = {"aws": "Aws", "gcp": "Gcp", "azure": "Azure"}


def test_the_shipped_clouds_are_the_folders_with_a_cloud_module() -> None:
    folders = sorted(entry.parent.name for entry in (REPO / "components").glob("*/cloud.py"))
    assert folders == sorted(CLOUDS) == sorted(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_cloud_provides_the_same_pure_plan_and_its_component(name: str) -> None:
    cloud = CLOUDS[name]
    assert cloud.name == name and issubclass(cloud.error, ConfigError)
    token = importlib.import_module(cloud.component.__module__).TOKEN
    assert token == f"spotgpu:{name}:GpuPool"
    args = pool_args(name)
    plan = cloud.plan(args)
    assert type(plan).__name__ == f"{TITLES[name]}PoolPlan"  # one name per cloud, none of them a bare PoolPlan
    assert plan == cloud.plan(args)  # pure: same args, same plan
    assert plan.pool == args.spec.name
    assert plan.control_store == control_store_url(plan.checkpoint_store)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_cloud_refuses_another_clouds_pool_before_it_registers_anything(name: str) -> None:
    cloud = CLOUDS[name]
    args = pool_args(next(other for other in SHIPPED if other != name))
    refusal = rf"spotgpu:pools\[{args.spec.name}\]\.cloud: spotgpu_pulumi\.{name}\.GpuPool builds only"
    with pytest.raises(cloud.error, match=refusal):
        cloud.plan(args)
    registered, error = registered_until_failure(lambda: cloud.component(args.spec.name, args, None))
    assert "builds only" in str(error)
    assert registered == []


def test_gcp_plans_before_it_registers() -> None:
    """Defect: GCP's GpuPool registered itself, then planned; a bad pool left a half-built tree."""
    args = pool_args("gcp")
    assert isinstance(args.spec, GcpPoolSpec)
    twice = args.spec.model_copy(update={"zones": (args.spec.zones[0], args.spec.zones[0])})  # skipped validation
    registered, error = registered_until_failure(
        lambda: CLOUDS["gcp"].component("train-gcp", dataclasses.replace(args, spec=twice), None)
    )
    assert isinstance(error, GcpPlanError) and "lists a zone twice" in str(error)
    assert registered == []


def test_the_checker_sees_what_a_component_registered_before_it_failed() -> None:
    class HalfBuilt(pulumi.ComponentResource):
        def __init__(self) -> None:
            super().__init__("spotgpu:test:HalfBuilt", "half", None, None)
            raise ValueError("planned too late")

    registered, _ = registered_until_failure(HalfBuilt)
    assert [r.type for r in registered] == ["spotgpu:test:HalfBuilt"]


# A fourth cloud, one "folder" in this test: its plan, its component, its registration.


class FakePlanError(ConfigError):
    pass


@dataclass(frozen=True)
class FakePoolPlan:
    pool: str
    checkpoint_store: str
    control_store: str


PLANNED: list[str] = []


def plan_fake_pool(args: PoolArgs) -> FakePoolPlan:
    if args.spec.name == "refused":
        raise FakePlanError("capacity.max: is more than the fake cloud holds (value: 2); fix: use 1")
    PLANNED.append(args.spec.name)
    store = planning.store_url("fake", "bucket", planning.checkpoint_prefix(args.spec))
    return FakePoolPlan(args.spec.name, store, f"{store}/_controller")


class FakeGpuPool(pulumi.ComponentResource):
    exports: dict[str, Any]

    def __init__(self, name: str, args: PoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        plan = plan_fake_pool(args)
        super().__init__("spotgpu:fake:GpuPool", name, None, opts)
        pulumi.ComponentResource("spotgpu:fake:SpotGroup", f"{name}-spot", None, pulumi.ResourceOptions(parent=self))
        self.exports = {"cloud": "fake", "checkpointStore": plan.checkpoint_store}
        self.register_outputs(self.exports)


@pytest.fixture
def fake_cloud(monkeypatch: pytest.MonkeyPatch) -> Cloud[FakePoolPlan]:
    cloud = Cloud(name="fake", plan=plan_fake_pool, component=FakeGpuPool, error=FakePlanError)
    monkeypatch.setitem(CLOUDS, "fake", cloud)
    PLANNED.clear()
    return cloud


def fake_config(*names: str) -> StackConfig:
    """The dev stack with fake pools: AWS specs relabelled (the registry only reads ``cloud`` and the name)."""
    config = config_with("aws", "dev")
    pools = [config.pools[0].model_copy(update={"cloud": "fake", "name": name}) for name in names]
    # a cloud the GPU catalogue does not price: its workload types its on-demand price
    workloads = {k: w.model_copy(update={"prices": w.prices.model_copy(update={"on_demand_per_hour": 1.006})})
                 for k, w in config.workloads.items()}  # fmt: skip
    return config.model_copy(update={"pools": type(config.pools)(pools), "workloads": workloads})


def test_a_fourth_cloud_is_planned_and_deployed_through_the_registry(fake_cloud: Cloud[FakePoolPlan]) -> None:
    config = fake_config("dev-fake")
    plan_all(config)  # the preview edge
    assert PLANNED == ["dev-fake"]
    pools: dict[str, Any] = {}
    resources = record(lambda: pools.update(deploy(config)))
    assert list(pools) == ["dev-fake"] and isinstance(pools["dev-fake"], FakeGpuPool)
    assert [(r.type, r.name) for r in resources if r.type.startswith("spotgpu:")] == [
        ("spotgpu:fake:GpuPool", "dev-fake"),
        ("spotgpu:fake:SpotGroup", "dev-fake-spot"),
    ]


def test_the_preview_edge_turns_a_fourth_clouds_refusal_into_one_config_line(
    fake_cloud: Cloud[FakePoolPlan],
) -> None:
    with pytest.raises(ConfigError, match=r"^spotgpu:pools\[refused\]: capacity\.max: is more than .*; fix: use 1$"):
        plan_all(fake_config("refused"))
    registered, error = registered_until_failure(lambda: deploy(fake_config("refused")))
    assert isinstance(error, FakePlanError) and registered == []


def test_a_cloud_registered_under_another_name_is_refused() -> None:
    with pytest.raises(ValueError, match="registered as"):
        CLOUDS["other"] = CLOUDS["aws"]
    with pytest.raises(KeyError, match="no cloud 'nowhere'"):
        CLOUDS["nowhere"]


def _imported(path: str) -> set[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return found | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


@pytest.mark.parametrize("path", ["components/platform.py", "components/offline/validate.py", "components/package.py"])
def test_the_dispatchers_name_no_cloud_package(path: str) -> None:
    """``deploy``, ``plan_all`` and the packaged pools reach a cloud only through the registry."""
    clouds = tuple(f"spotgpu_pulumi.{name}" for name in SHIPPED)
    assert [m for m in _imported(path) if m.startswith(clouds)] == []
    assert "PoolSpec" not in (REPO / path).read_text(encoding="utf-8")  # no isinstance dispatch on spec types


def test_looking_up_one_cloud_imports_no_other_providers_sdk() -> None:
    code = (
        "import sys\nfrom spotgpu_pulumi.clouds import CLOUDS\nCLOUDS['gcp'].plan\n"
        "print(sorted(m for m in ('pulumi_aws', 'pulumi_azure_native', 'pulumi_gcp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pulumi_gcp']"
