"""All clouds at once: the spot pools, fallback groups and stores of one stack."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from spotgpu.storage.urls import parse_store_url as parse
from spotgpu_guard import aws, aws_s3, azure, gcp
from spotgpu_guard.inventory import Inventory
from spotgpu_guard.links import POOL
from spotgpu_guard.model import Group, SpotPool, Store

_COMPUTE = (aws, gcp, azure)
_STORAGE = (aws_s3, gcp, azure)
def parse_store_url(url: str) -> tuple[str, str] | None:
    """``s3://b/p`` -> ("aws", "b"); ``gs://``, ``az://ACCOUNT/...`` and blob https URLs likewise: the cloud and
    the resource that holds the data (bucket, or Azure storage account), read by the one parser
    (:func:`spotgpu.storage.urls.parse_store_url`); None for anything that is not a cloud store URL."""
    try:
        where = parse(url.strip())
    except ValueError:
        return None
    return None if where.cloud is None else (where.cloud, where.store_name)


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
        value = pool.links.get(POOL)
        return value if isinstance(value, str) else pool.res.urn
