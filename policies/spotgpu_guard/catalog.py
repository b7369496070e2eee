"""All clouds at once: the spot pools, fallback groups and stores of one stack."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from spotgpu_guard import aws, aws_s3, azure, gcp
from spotgpu_guard.inventory import Inventory
from spotgpu_guard.model import Group, SpotPool, Store

_COMPUTE = (aws, gcp, azure)
_STORAGE = (aws_s3, gcp, azure)
_STORE_URL = re.compile(
    r"^(?:(?P<scheme>s3|gs|az)://(?P<name>[^/]+)"
    r"|https://(?P<account>[a-z0-9]+)\.blob\.core\.windows\.net)(?:/.*)?$"
)
_SCHEME_CLOUD = {"s3": "aws", "gs": "gcp", "az": "azure"}


def parse_store_url(url: str) -> tuple[str, str] | None:
    """``s3://b/p`` -> ("aws", "b"); ``gs://``, ``az://account/...`` and blob https URLs likewise."""
    m = _STORE_URL.match(url.strip())
    if not m:
        return None
    if m.group("account"):
        return "azure", m.group("account")
    return _SCHEME_CLOUD[m.group("scheme")], m.group("name")


@dataclass
class Catalog:
    inv: Inventory

    @cached_property
    def pools(self) -> list[SpotPool]:
        return [p for cloud in _COMPUTE for p in cloud.spot_pools(self.inv)]

    @cached_property
    def groups(self) -> list[Group]:
        return [g for cloud in _COMPUTE for g in cloud.fallback_groups(self.inv)]

    @cached_property
    def stores(self) -> list[Store]:
        return [s for cloud in _STORAGE for s in cloud.stores(self.inv)]

    def store_for(self, cloud: str, name: str) -> Store | None:
        return next((s for s in self.stores if s.cloud == cloud and name in s.names), None)

    def group_named(self, name: str) -> Group | None:
        return next((g for g in self.groups if name in g.names), None)

    def pool_key(self, pool: SpotPool) -> str:
        """Pools group by their ``spotgpu-pool`` link; an untagged resource is its own pool."""
        value = pool.links.get("spotgpu-pool")
        return value if isinstance(value, str) else pool.res.urn
