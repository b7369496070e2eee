"""Issue 34: one plan per pool per run. ``spotgpu preview`` validates the stack by planning every pool
before Pulumi's machinery starts, then runs the stack program, whose ``load_config()`` plans the same
config; the program must take the validation's plans, not plan each pool a second time."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spotgpu.config import read_stack_file, stack_config_from_engine
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import CLOUDS, plan_stack, reuse_plans
from spotgpu_pulumi.offline.cli import register

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def plans() -> Iterator[Counter[str]]:
    """Every cloud's planner, counting its calls by pool name for the test's duration."""
    calls: Counter[str] = Counter()
    originals = {name: CLOUDS[name] for name in CLOUDS}

    def counting(plan: Any) -> Any:
        def counted(args: PoolArgs) -> Any:
            calls[args.spec.name] += 1
            return plan(args)

        return counted

    for name, cloud in originals.items():
        CLOUDS[name] = dataclasses.replace(cloud, plan=counting(cloud.plan))
    try:
        yield calls
    finally:
        for name, cloud in originals.items():
            CLOUDS[name] = cloud


def _preview(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["preview", *argv])
    return int(args.func(args))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_one_preview_plans_each_pool_once(
    stack: str, plans: Counter[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    assert _preview(["--stack", stack, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    _, engine = read_stack_file(str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
    pools = {p.name for p in stack_config_from_engine(engine, project_dir=str(REPO)).pools}
    assert set(doc["economics"]["pools"]) == pools  # the preview ran the whole stack
    assert plans == dict.fromkeys(pools, 1)


def test_only_an_equal_config_reuses_the_plans(plans: Counter[str]) -> None:
    """The reuse is by equality of the whole validated config: a program that builds another config
    (another stack's, or its own) is planned as usual, and nothing is reused outside the preview's run."""

    def config(stack: str) -> StackConfig:
        _, engine = read_stack_file(str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
        return stack_config_from_engine(engine, project_dir=str(REPO))

    dev = plan_stack(config("dev"))
    dev_pools = {p.pool for p in dev.pools}
    assert plans == dict.fromkeys(dev_pools, 1)
    with reuse_plans(dev):
        assert plan_stack(config("dev")) is dev  # read again, equal: the same plans
        assert plans == dict.fromkeys(dev_pools, 1)
        prod = plan_stack(config("prod"))
    assert plans == {**dict.fromkeys(dev_pools, 1), **dict.fromkeys((p.pool for p in prod.pools), 1)}
    assert plan_stack(config("dev")) is not dev  # outside the run: planned again
    assert plans == {**dict.fromkeys(dev_pools, 2), **dict.fromkeys((p.pool for p in prod.pools), 1)}
