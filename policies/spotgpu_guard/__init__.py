"""spotgpu-guard: the CrossGuard rules that make spot GPU capacity safe to run.

Every rule judges concrete cloud resources (AWS, Google Cloud, Azure) through the
link contract in :mod:`spotgpu.contract.tags`, so a stack of raw resources is judged the
same way as one built from the spotgpu components. ``policies/__main__.py`` only
serves :data:`POLICIES`; the offline harness (``components/offline/policy_harness.py``)
loads the very same pack.
"""

from pulumi_policy import Policy

from spotgpu_guard import (
    rules_crossfield,
    rules_economics,
    rules_gpu_fit,
    rules_links,
    rules_notice,
    rules_secrets,
    rules_storage,
    rules_tiers,
)

PACK_NAME = "spotgpu-guard"
DESCRIPTION = "Spot GPU pools checkpoint durably, fall back on-demand, handle notices and stay diversified."

POLICIES: list[Policy] = [
    *rules_links.RULES,
    *rules_storage.RULES,
    *rules_notice.RULES,
    *rules_economics.RULES,
    *rules_crossfield.RULES,
    *rules_gpu_fit.RULES,
    *rules_secrets.RULES,
    *rules_tiers.RULES,
]

__all__ = ["DESCRIPTION", "PACK_NAME", "POLICIES"]
