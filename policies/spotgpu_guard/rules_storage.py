"""Checkpoint stores hold the only durable copy of the work: they must be hard to lose or leak.

Judged: every store a spot pool links to, and every bucket/account tagged
``spotgpu-role=checkpoint-store``. Versioning keeps an overwritten or deleted
generation recoverable; encryption, no public access and TLS only keep model
weights private; cleaning up incomplete uploads stops a preempted writer's
half-written shards from costing money forever. On Azure, shared keys bypass
Entra ID, so they are off and the pool authenticates with its managed identity.

Inherent properties are not re-checked: GCS and Azure Storage always encrypt at
rest, GCS serves only HTTPS, and Azure discards uncommitted blocks after 7 days.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu_guard.catalog import Catalog, parse_store_url
from spotgpu_guard.links import CHECKPOINT_STORE
from spotgpu_guard.model import Store
from spotgpu_guard.rule import Finding, stack_rule


def judged_stores(catalog: Catalog) -> list[Store]:
    """Stores linked from a spot pool plus stores tagged as checkpoint stores, each once."""
    chosen: dict[str, Store] = {s.res.urn: s for s in catalog.stores if s.role_tagged}
    for pool in catalog.pools:
        url = pool.links.get(CHECKPOINT_STORE)
        parsed = parse_store_url(url) if isinstance(url, str) else None
        store = catalog.store_for(*parsed) if parsed else None
        if store is not None:
            chosen.setdefault(store.res.urn, store)
    return list(chosen.values())


def check_store_hardened(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for store in judged_stores(catalog):
        for gap in store.gaps:
            yield Finding(store.res.urn, f"checkpoint store {store.kind} {store.res.label()}: {gap.message}")


RULES = [
    stack_rule(
        "checkpoint-store-hardened",
        "Checkpoint stores keep versions, encrypt, refuse public and plain-HTTP access, clean up incomplete "
        "uploads and (Azure) refuse shared keys and TLS below 1.2.",
        EnforcementLevel.MANDATORY,
        check_store_hardened,
        remediation="Add the missing companion resources or flags named in the message",
    ),
]
