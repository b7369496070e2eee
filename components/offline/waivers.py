"""The waivers in force, for the preview: what a reviewer must see next to "no violations".

A waived rule reports nothing, so a preview that only lists violations says "no violations" for a
GCP pool with a 0 s notice once ``notice-handled.zeroNoticeWaivers`` names it. Every stated
exception is listed instead, with its reason, from the three places one can be stated:

1. the policy config: a rule set to ``disabled``, and ``notice-handled.zeroNoticeWaivers`` entries
   (marked when they name no pool or resource of the stack: a waiver for nothing is a typo);
2. the stack config: every pool's ``optOut.*`` reason and ``controller.waiver``;
3. resource links (``spotgpu-waiver``, ``spotgpu-controller-waiver``) of pools the stack config
   does not declare: a raw program states its waivers on the resources themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from spotgpu.contract import tags
from spotgpu.models import StackConfig
from spotgpu_pulumi.offline.mocks import RecordedResource


@dataclass(frozen=True)
class Waiver:
    """One stated exception: where it is stated, what it waives, and why."""

    source: str  # "policy config" | "stack config" | "resource link"
    key: str  # the key to edit to withdraw it
    waives: str
    reason: str

    def document(self) -> dict[str, str]:
        return asdict(self)

    def line(self) -> str:
        return f"  [{self.source}] {self.key}: {self.waives}: {self.reason}"


#: What each opt-out of a pool waives (spotgpu.models.pools.OptOut).
OPT_OUTS = {
    "single_zone": ("singleZone", "capacity-diversified: one zone"),
    "single_type": ("singleType", "capacity-diversified: one GPU type or size"),
    "idle_rungs": ("idleRungs", "ladder rungs with no group behind them (warned, not refused)"),
    "catalogue": ("catalogue", "types, sizes or regions the GPU catalogue does not know"),
    "small_fallback": ("smallFallback", "an on-demand fallback smaller than capacity.target"),
    "max_price_above_on_demand": ("maxPriceAboveOnDemand", "an Azure maxPrice above the on-demand price"),
}


def _links(resource: RecordedResource) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for carrier in ("tags", "labels", "metadata"):
        value = resource.inputs.get(carrier)
        if isinstance(value, dict):
            found.update({k: v for k, v in value.items() if isinstance(k, str) and k.startswith(tags.PREFIX)})
        elif isinstance(value, list):  # an Auto Scaling group's [{key, value}]
            found.update({i["key"]: i.get("value") for i in value if isinstance(i, dict) and isinstance(i.get("key"), str)})
    return found


def from_policy_config(resolved: Mapping[str, tuple[Any, Mapping[str, Any]]], names: set[str]) -> list[Waiver]:
    """Disabled rules and zero-notice waivers from the resolved policy config (level, properties)."""
    out: list[Waiver] = []
    for policy, (level, props) in sorted(resolved.items()):
        if getattr(level, "value", level) == "disabled":
            out.append(Waiver("policy config", policy, "the whole rule is disabled", "(no reason field: say why in review)"))
        for key, reason in sorted((props.get("zeroNoticeWaivers") or {}).items()):
            unknown = "" if key in names else " (names no pool or resource of this stack)"
            out.append(Waiver("policy config", f"{policy}.zeroNoticeWaivers.{key}",
                              f"notice-handled: a 0 s GCP preemption notice{unknown}", str(reason)))  # fmt: skip
    return out


def from_stack(config: StackConfig | None) -> list[Waiver]:
    if config is None:
        return []
    out: list[Waiver] = []
    for pool in config.pools:
        for field, (key, what) in OPT_OUTS.items():
            reason = getattr(pool.opt_out, field)
            if reason:
                out.append(Waiver("stack config", f"pools[{pool.name}].optOut.{key}", what, reason))
        if not pool.controller.enabled and pool.controller.waiver:
            out.append(Waiver("stack config", f"pools[{pool.name}].controller.waiver",
                              "spot-gpu-requires-fallback: no controller job grows the fallback group",
                              pool.controller.waiver))  # fmt: skip
    return out


def from_links(resources: Iterable[RecordedResource], declared: set[str]) -> list[Waiver]:
    """Waiver links of pools the stack config does not declare (raw resources), once per pool."""
    out: dict[tuple[str, str], Waiver] = {}
    for resource in resources:
        links = _links(resource)
        linked = links.get(tags.POOL)
        pool = linked if isinstance(linked, str) else resource.name
        if pool in declared:
            continue
        for link, what in ((tags.WAIVER, "capacity-diversified"),
                           (tags.CONTROLLER_WAIVER, "spot-gpu-requires-fallback: no controller job")):  # fmt: skip
            reason = links.get(link)
            if isinstance(reason, str) and reason.strip():
                out.setdefault((pool, link), Waiver("resource link", f"{link} on '{resource.name}'", what, reason))
    return list(out.values())


def waivers_in_force(
    resources: list[RecordedResource],
    resolved: Mapping[str, tuple[Any, Mapping[str, Any]]] | None,
    config: StackConfig | None,
) -> list[Waiver]:
    declared = {pool.name for pool in config.pools} if config is not None else set()
    names = declared | {r.name for r in resources} | {
        str(_links(r).get(tags.POOL)) for r in resources if _links(r).get(tags.POOL)
    }
    return [*from_policy_config(resolved or {}, names), *from_stack(config), *from_links(resources, declared)]
