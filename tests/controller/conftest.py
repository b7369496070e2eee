"""Fixtures for the controller tests (helpers live in controller_factories)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from controller_factories import ladder, make_plan

from spotgpu.controller.reconcile import PoolPlan
from spotgpu.models.ladder import FallbackLadder


@pytest.fixture
def plan_factory() -> Callable[..., PoolPlan]:
    return make_plan


@pytest.fixture
def ladder_factory() -> Callable[..., FallbackLadder]:
    return ladder
