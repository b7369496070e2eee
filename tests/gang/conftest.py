"""Fixtures: a per-test gang (nodes + ranks, all killed by PID at the end) and one shared
uninterrupted reference run per world size."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gang_testkit import Cluster, Zygote


@pytest.fixture(scope="session")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    yield z
    z.close()


@pytest.fixture
def cluster(tmp_path: Path, zygote: Zygote) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zygote)
    yield c
    c.close()


Reference = tuple[dict[int, dict[int, str]], bytes]


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote) -> Iterator[Callable[[int], Reference]]:
    """Per-rank per-step losses and final parameters of an uninterrupted run (no agents)."""
    cache: dict[int, Reference] = {}
    made: list[Cluster] = []

    def get(world: int) -> Reference:
        if world not in cache:
            c = Cluster(tmp_path_factory.mktemp(f"reference{world}"), zygote)
            made.append(c)
            codes = c.finish(c.launch("ref", world), timeout=120)
            assert codes == [0] * world, c.stderr("ref")
            cache[world] = ({r: c.losses("ref", r) for r in range(world)}, c.params("ref"))
        return cache[world]

    yield get
    for c in made:
        c.close()
