"""Messages about resources a spotgpu component made name the stack key to edit.

A rule's own fix speaks of the resource it judges (``scheduling.preemption_notice_duration``),
which is right for a raw program. The owner of a pool built by ``spotgpu_pulumi``'s ``GpuPool``
never edits that resource: they edit the stack config it came from
(``pools[dev-gcp].notice.preemptionNoticeSeconds``). A resource counts as component-made when a
``spotgpu:`` component is among its parents (its URN's type chain says so, unknowns or not) and it
carries its pool's ``spotgpu-pool`` link; then :func:`restate` swaps the message's fix for the
stack key's. ``{pool}`` in a stack fix becomes ``pools[NAME]``, ``{name}`` the pool's name.
"""

from __future__ import annotations

from spotgpu_guard.inventory import Res
from spotgpu_guard.links import POOL, Links

#: Type tokens of spotgpu's own components start with this (``spotgpu:gcp:GpuPool``).
COMPONENT_PREFIX = "spotgpu:"


def made_by_component(res: Res) -> bool:
    """True when a spotgpu component is among the resource's parents (read off its URN's type chain)."""
    parts = res.urn.split("::")
    chain = parts[2].split("$") if len(parts) >= 4 else []
    return any(token.startswith(COMPONENT_PREFIX) for token in chain[:-1])


def component_pool(res: Res, links: Links) -> str | None:
    """The stack's name for the pool a component made this resource for; None for a raw resource."""
    name = links.get(POOL)
    return name if isinstance(name, str) and made_by_component(res) else None


def restate(message: str, res: Res, links: Links, stack_fix: str) -> str:
    """``message`` with its fix in stack-config terms when a component made ``res``; else unchanged."""
    name = component_pool(res, links)
    if name is None:
        return message
    head = message.split("; fix: ", 1)[0]
    return f"{head}; fix: {stack_fix.format(pool=f'pools[{name}]', name=name)}"
