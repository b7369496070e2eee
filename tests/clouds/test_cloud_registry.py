"""One cloud interface (issue 24, item 2): every cloud is a folder in one registry, planned before it registers.

``plan_stack`` (the preview edge and ``load_config``), ``deploy`` and the package provider find a
pool's cloud in ``spotgpu_pulumi.clouds.CLOUDS``; a fourth cloud registered here is planned and
deployed through the same path with no edit to ``platform.py`` or ``clouds.py``. Each pool is
planned once (issue 34, item 3): ``deploy`` builds from the plans ``plan_stack`` made.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pulumi
import pytest
from cloud_fixtures import REPO, SHIPPED, config_with, pool_args, registered_until_failure, stack_raw

from spotgpu import catalogue
from spotgpu.bootstrap import control_store_url
from spotgpu.config import ConfigError, PlanError, parse_stack_config
from spotgpu.models import StackConfig
from spotgpu.models.base import FieldProblem
from spotgpu_pulumi import planning
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import CLOUDS, Cloud, plan_stack
from spotgpu_pulumi.offline.testing import record
from spotgpu_pulumi.platform import deploy

TITLES = {"aws": "Aws", "gcp": "Gcp", "azure": "Azure"}


def test_the_shipped_clouds_are_the_folders_with_a_cloud_module() -> None:
    folders = sorted(entry.parent.name for entry in (REPO / "components").glob("*/cloud.py"))
    assert folders == sorted(CLOUDS) == sorted(SHIPPED) == sorted(catalogue.CLOUDS)  # the runtime's one list


@pytest.mark.parametrize("name", SHIPPED)
def test_each_cloud_provides_the_same_pure_plan_and_its_component(name: str) -> None:
    cloud = CLOUDS[name]
    assert cloud.name == name
    token = importlib.import_module(cloud.component.__module__).TOKEN
    assert token == f"spotgpu:{name}:GpuPool"
    args = pool_args(name)
    plan = cloud.plan(args)
    assert type(plan).__name__ == f"{TITLES[name]}PoolPlan"  # one name per cloud, none of them a bare PoolPlan
    assert plan == cloud.plan(args)  # pure: same args, same plan
    assert plan.pool == args.spec.name and plan.args == args
    assert plan.control_store == control_store_url(plan.checkpoint_store)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_cloud_refuses_another_clouds_pool_at_its_cloud_key(name: str) -> None:
    cloud = CLOUDS[name]
    args = pool_args(next(other for other in SHIPPED if other != name))
    refusal = rf"^spotgpu:pools\[{args.spec.name}\]\.cloud: spotgpu_pulumi\.{name}\.plan_pool plans only .* pools"
    with pytest.raises(PlanError, match=refusal):
        cloud.plan(args)


def test_every_pool_is_planned_before_the_first_registers() -> None:
    """A refused pool after a good one: the stack's plan fails, so nothing is built (GCP's GpuPool once
    registered itself, then planned, and left a half-built tree)."""
    raw = stack_raw("prod")
    raw["pools"] = [p if p["cloud"] != "gcp" else {**p, "project": "google-ml-123"} for p in raw["pools"]]
    config = parse_stack_config(raw)
    assert [p.cloud for p in config.pools].index("gcp") > 0  # a pool that plans comes first
    registered, error = registered_until_failure(lambda: deploy(plan_stack(config)))
    assert isinstance(error, ConfigError) and str(error).startswith("spotgpu:pools[train-gcp].project: makes a bucket")
    assert registered == []


def test_the_checker_sees_what_a_component_registered_before_it_failed() -> None:
    class HalfBuilt(pulumi.ComponentResource):
        def __init__(self) -> None:
            super().__init__("spotgpu:test:HalfBuilt", "half", None, None)
            raise ValueError("planned too late")

    registered, _ = registered_until_failure(HalfBuilt)
    assert [r.type for r in registered] == ["spotgpu:test:HalfBuilt"]


# A fourth cloud, one "folder" in this test: its plan, its component, its registration.


@dataclass(frozen=True)
class FakePoolPlan:
    args: PoolArgs
    pool: str
    checkpoint_store: str
    control_store: str


PLANNED: list[str] = []


def plan_fake_pool(args: PoolArgs) -> FakePoolPlan:
    PLANNED.append(args.spec.name)
    if args.spec.name == "refused":
        raise PlanError(FieldProblem("is more than the fake cloud holds", at="capacity.max", value=2, fix="use 1"),
                        pool=args.spec.name)
    store = planning.store_url("fake", "bucket", planning.checkpoint_prefix(args.spec))
    return FakePoolPlan(args, args.spec.name, store, f"{store}/_controller")


class FakeGpuPool(pulumi.ComponentResource):
    exports: dict[str, Any]

    def __init__(self, name: str, plan: FakePoolPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spotgpu:fake:GpuPool", name, None, opts)
        pulumi.ComponentResource("spotgpu:fake:SpotGroup", f"{name}-spot", None, pulumi.ResourceOptions(parent=self))
        self.exports = {"cloud": "fake", "checkpointStore": plan.checkpoint_store}
        self.register_outputs(self.exports)


@pytest.fixture
def fake_cloud(monkeypatch: pytest.MonkeyPatch) -> Cloud[FakePoolPlan]:
    cloud = Cloud(name="fake", plan=plan_fake_pool, component=FakeGpuPool)
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


def test_a_fourth_cloud_is_planned_once_and_deployed_through_the_registry(fake_cloud: Cloud[FakePoolPlan]) -> None:
    """Defect: each pool was planned twice per run (the edge's plan_all, then GpuPool.__init__ again)."""
    stack = plan_stack(fake_config("dev-fake"))  # the preview edge and load_config
    assert PLANNED == ["dev-fake"]
    pools: dict[str, Any] = {}
    resources = record(lambda: pools.update(deploy(stack)))
    assert PLANNED == ["dev-fake"]  # deploy built from that plan
    assert list(pools) == ["dev-fake"] and isinstance(pools["dev-fake"], FakeGpuPool)
    assert [(r.type, r.name) for r in resources if r.type.startswith("spotgpu:")] == [
        ("spotgpu:fake:GpuPool", "dev-fake"),
        ("spotgpu:fake:SpotGroup", "dev-fake-spot"),
    ]


def test_the_preview_edge_turns_a_fourth_clouds_refusal_into_one_config_line(
    fake_cloud: Cloud[FakePoolPlan],
) -> None:
    with pytest.raises(ConfigError) as err:
        plan_stack(fake_config("refused"))
    assert str(err.value) == "spotgpu:pools[refused].capacity.max: is more than the fake cloud holds (value: 2); fix: use 1"
    with pytest.raises(ConfigError, match=r"^ml:pools\[refused\]\.capacity\.max: "):  # named in the stack's namespace
        plan_stack(fake_config("refused"), namespace="ml")


def test_a_cloud_registered_under_another_name_is_refused() -> None:
    with pytest.raises(ValueError, match="registered as"):
        CLOUDS["other"] = CLOUDS["aws"]
    with pytest.raises(KeyError, match="no cloud 'nowhere'"):
        CLOUDS["nowhere"]


def _imported(path: str) -> set[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return found | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


@pytest.mark.parametrize(
    "path", ["components/platform.py", "components/clouds.py", "components/offline/validate.py", "components/package.py"]
)
def test_the_dispatchers_name_no_cloud_package(path: str) -> None:
    """``deploy``, ``plan_stack`` and the packaged pools reach a cloud only through the registry."""
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
