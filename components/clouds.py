"""The registry of clouds: every part that works per cloud looks the cloud up here.

A cloud is one folder, ``spotgpu_pulumi/<name>/``, whose ``cloud.py`` defines
``CLOUD = Cloud(name, plan, component)``: its pure planner and its ``GpuPool``, which
builds from the plan. :func:`plan_stack` plans every pool of a stack once, through
:data:`CLOUDS` by the config's ``cloud:`` value; ``platform.deploy`` hands each pool's
plan to its ``GpuPool``, and the package provider (``package._PackagedPool``) plans and
builds its one pool the same way, so adding a cloud adds a folder and edits none of them.
The folders are the clouds :data:`spotgpu.catalogue.CLOUDS` names (a test keeps them equal).

A cloud's package is imported the first time it is looked up, so a stack of one
cloud never imports the other providers' SDKs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import pulumi

from spotgpu.config import ConfigError, KeyPaths, PlanError
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs


class CloudPoolPlan(Protocol):
    """What any cloud's pool plan tells, whatever else it decides."""

    @property
    def args(self) -> PoolArgs:
        """What the pool was planned from."""
        ...

    @property
    def pool(self) -> str: ...

    @property
    def checkpoint_store(self) -> str:
        """The store URL the pool exports and its agents write to."""
        ...

    @property
    def control_store(self) -> str:
        """The controller's state URL, next to the checkpoints."""
        ...


class PoolComponent(Protocol):
    """A built ``GpuPool``: what the stack exports for it (the common keys of ``outputs.py`` and the cloud's own)."""

    exports: dict[str, Any]


Plan = TypeVar("Plan", bound=CloudPoolPlan)


@dataclass(frozen=True)
class Cloud(Generic[Plan]):
    """One cloud: the same pure planner signature and the component that builds from it."""

    name: str
    """The config's ``cloud:`` value and the middle of the type token ``spotgpu:<name>:GpuPool``."""
    plan: Callable[[PoolArgs], Plan]
    """Pure: decides the whole pool, registers nothing; raises :class:`~spotgpu.config.PlanError` on bad input."""
    component: Callable[[str, Plan, pulumi.ResourceOptions | None], PoolComponent]
    """The ``GpuPool`` class: builds what the plan decided."""
    link: Callable[[Plan, Sequence[PoolComponent]], Plan] | None = None
    """Pure: the plan with what it shares with pools built before it in the same program (Azure: the
    subscription's one Scheduled Events topic); None when a cloud's pools share nothing."""


class CloudRegistry(MutableMapping[str, "Cloud[Any]"]):
    """Cloud name -> :class:`Cloud`, filled from the folders that hold a ``cloud.py``, imported on first use.

    Mutable so a test (or a program's own cloud) can register one more; the shipped clouds need no line here.
    """

    def __init__(self, package: str, folder: Path) -> None:
        self._package = package
        self._entries: dict[str, str | Cloud[Any]] = {
            entry.parent.name: f"{package}.{entry.parent.name}.cloud" for entry in sorted(folder.glob("*/cloud.py"))
        }

    def __getitem__(self, name: str) -> Cloud[Any]:
        try:
            entry = self._entries[name]
        except KeyError:
            raise KeyError(f"no cloud {name!r} in {self._package} (clouds: {', '.join(self._entries)})") from None
        if isinstance(entry, str):
            entry = importlib.import_module(entry).CLOUD
            if not isinstance(entry, Cloud) or entry.name != name:
                raise TypeError(f"{self._package}.{name}.cloud.CLOUD is not the Cloud named {name!r}")
            self._entries[name] = entry
        return entry

    def __setitem__(self, name: str, cloud: Cloud[Any]) -> None:
        if cloud.name != name:
            raise ValueError(f"cloud {cloud.name!r} registered as {name!r}")
        self._entries[name] = cloud

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)


#: Every cloud, by the config's ``cloud:`` value.
CLOUDS = CloudRegistry(__name__.rpartition(".")[0], Path(__file__).parent)


@dataclass(frozen=True)
class StackPlan:
    """A validated stack and every pool's plan, in config order: what ``platform.deploy`` builds."""

    config: StackConfig
    pools: tuple[CloudPoolPlan, ...]


#: A stack already planned this run (:func:`reuse_plans`), which :func:`plan_stack` returns for an equal config.
_PLANNED: ContextVar[StackPlan | None] = ContextVar("spotgpu_planned", default=None)


@contextmanager
def reuse_plans(stack: StackPlan | None) -> Iterator[None]:
    """Inside, :func:`plan_stack` of a config equal to ``stack.config`` returns ``stack``: its pools are not
    planned again.

    ``spotgpu preview`` validates the stack by planning every pool before Pulumi's machinery runs, then
    runs the stack program, whose ``load_config()`` reads the same config from the engine: the program
    builds from the validation's plans (issue 34: one plan per pool per run). The planners are pure, so an
    equal config has equal plans; a program that builds another config is planned as usual.
    """
    token = _PLANNED.set(stack)
    try:
        yield
    finally:
        _PLANNED.reset(token)


def plan_stack(config: StackConfig, namespace: str = "spotgpu") -> StackPlan:
    """Plan every pool once, with its cloud's planner; the first refusal is one ConfigError line,
    its keys named under ``namespace`` as the stack file writes them. Inside :func:`reuse_plans`, an equal
    config's plans are returned as they are."""
    done = _PLANNED.get()
    if done is not None and done.config == config:
        return done
    plans = []
    for spec in config.pools:
        try:
            plans.append(CLOUDS[spec.cloud].plan(PoolArgs.for_pool(config, spec)))
        except PlanError as err:
            raise ConfigError(err.render(KeyPaths(namespace))) from None
    return StackPlan(config, tuple(plans))
