"""Shared planning (``spotgpu_pulumi.planning``): one fact, the same on every cloud.

Two defects named in issue 24 are fixed here and tested on all three clouds: the waiver text
read ``single-zone:`` on AWS and ``singleZone:`` elsewhere, and a checkpoint prefix ending in
``/`` was stripped on AWS only (GCP and Azure then wrote ``prefix//_controller``).
"""

from __future__ import annotations

from typing import Any

import pytest
from cloud_fixtures import SHIPPED, pool_args

from spotgpu.contract import tags
from spotgpu_pulumi.clouds import CLOUDS

REASONS = {"singleZone": "quota exists in one zone only", "singleType": "only this GPU fits the model"}


def spot_links(name: str, plan: Any) -> dict[str, str]:
    """The link map each cloud puts on its spot capacity."""
    if name == "aws":
        return dict(plan.spot_links)
    if name == "gcp":
        return dict(plan.spot_metadata)
    return dict(plan.spot[0].tags)


@pytest.mark.parametrize("name", SHIPPED)
def test_the_waiver_reads_the_same_on_every_cloud(name: str) -> None:
    plan = CLOUDS[name].plan(pool_args(name, optOut=REASONS))
    expected = "singleZone: quota exists in one zone only; singleType: only this GPU fits the model"
    assert spot_links(name, plan)[tags.WAIVER] == expected


@pytest.mark.parametrize("name", SHIPPED)
def test_no_waiver_without_a_stated_opt_out(name: str) -> None:
    assert tags.WAIVER not in spot_links(name, CLOUDS[name].plan(pool_args(name)))


@pytest.mark.parametrize("name", SHIPPED)
def test_a_trailing_slash_in_the_prefix_is_dropped_on_every_cloud(name: str) -> None:
    plan = CLOUDS[name].plan(pool_args(name, checkpoint={"prefix": "teams/llm/"}))
    assert plan.checkpoint_store.endswith("/teams/llm")
    assert plan.control_store.endswith("/teams/llm/_controller")
    assert "//" not in plan.checkpoint_store.partition("://")[2]
    assert spot_links(name, plan)[tags.CHECKPOINT_STORE] == plan.checkpoint_store
    if name == "gcp":  # the controller's IAM condition admits exactly its state prefix
        assert 'objects/teams/llm/_controller/")' in plan.state_condition
    if name == "azure":  # the lifecycle filter is <container>/<prefix>/
        assert plan.storage.prefix == "teams/llm"
    if name == "aws":
        assert plan.prefix == "teams/llm"
