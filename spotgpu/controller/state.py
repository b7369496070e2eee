"""The controller's own memory: one small JSON record, everything else comes from the cloud.

What the cloud cannot tell us after a restart is kept here: when the pool lost
capacity (so the ladder wait survives a restart), which rung it reached, which
VMs were asked to drain and when (so scale-in waits for a commit *after* that),
which events and failures were already counted (so a redelivered SQS message or
a repeated listErrors entry is not double-counted), fallback spend so far, and
each VM's zone while it may still be named by a late event (an evicted Azure VM
is deleted, so no later listing says where it ran).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

#: How many event / failure keys to remember per pool; older ones cannot be redelivered anyway.
SEEN_LIMIT = 512
RECORD_VERSION = 1
#: Longest backoff; a group that has not failed for this long past its wait starts a fresh streak.
BACKOFF_CAP_SECONDS = 1800.0


@dataclass
class Backoff:
    """Explicit exponential backoff for one group: no jitter, so replays are deterministic."""

    attempts: int = 0
    until: float = 0.0
    #: The size the group was asked for when it last failed: only reaching it ends the streak.
    #: (Withdrawing the request while backed off must not look like success and reset the backoff.)
    wanted: int = 0

    def fail(self, now: float, wanted: int = 0, base: float = 60.0, cap: float = BACKOFF_CAP_SECONDS) -> None:
        self.attempts += 1
        self.wanted = max(self.wanted, wanted)
        self.until = now + min(cap, base * 2.0 ** min(self.attempts - 1, 30))

    def blocked(self, now: float) -> bool:
        return now < self.until

    def over(self, ready: int, now: float) -> bool:
        """The streak ended: the group delivered what it was asked, or nothing failed for a whole cap past the wait."""
        return ready >= self.wanted or now >= self.until + BACKOFF_CAP_SECONDS


@dataclass
class KnownVm:
    """Where a VM ran and when a listing last showed it: an event naming it after it is gone still gets its zone."""

    zone: str
    seen_at: float


@dataclass
class PoolState:
    lost_since: float | None = None  # capacity below target since (ladder clock)
    interrupted_at: float | None = None  # first interruption of this episode (latency clock)
    step_index: int = 0
    step_entered_at: float | None = None
    deferred: bool = False
    surplus_since: float | None = None
    drains: dict[str, float] = field(default_factory=dict)  # vm id -> drain requested at
    backoff: dict[str, Backoff] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    work_done_hours: float = 0.0  # committed work: newest reported step / totalSteps * workHours
    committed_step: int = 0
    committed_at: float | None = None  # time of the newest commit report counted
    whole_since: float | None = None  # the pool's current incarnation: when it was last seen whole
    members: list[str] = field(default_factory=list)  # VM ids seen last tick: a commit a lost VM reported still counts
    fallback_seconds: float = 0.0
    fallback_cost_usd: float = 0.0
    last_tick: float | None = None
    #: vm id -> its zone, for VMs listed within the event max age (see :meth:`note_zones`).
    zones: dict[str, KnownVm] = field(default_factory=dict)

    def note_zones(self, listed: Iterable[tuple[str, str]], now: float, max_age: float) -> None:
        """Remember the zone of each listed ``(vm id, zone)``; forget VMs not listed for longer than ``max_age``.

        An event about a VM gone for longer than the event max age is stale (recorded, never
        acted on), so its zone is not worth keeping: the memory holds at most the VMs the pool
        listed within that window.
        """
        for vm, zone in listed:
            if zone:
                self.zones[vm] = KnownVm(zone, now)
        for vm in [vm for vm, known in self.zones.items() if now - known.seen_at > max_age]:
            del self.zones[vm]

    def zone_of(self, vm: str) -> str:
        """The zone a listing last showed ``vm`` in; "" for a VM never seen (or forgotten)."""
        known = self.zones.get(vm)
        return known.zone if known is not None else ""

    def remember(self, key: str) -> bool:
        """Record a key; False when it was already seen (so the caller skips it)."""
        if key in self.seen:
            return False
        self.seen.append(key)
        del self.seen[:-SEEN_LIMIT]
        return True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PoolState:
        raw = dict(data)
        raw["backoff"] = {k: Backoff(**v) for k, v in raw.get("backoff", {}).items()}
        raw["zones"] = {k: KnownVm(**v) for k, v in raw.get("zones", {}).items()}
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in known})


@dataclass
class ControllerRecord:
    pools: dict[str, PoolState] = field(default_factory=dict)

    def pool(self, name: str) -> PoolState:
        return self.pools.setdefault(name, PoolState())

    def to_doc(self) -> dict[str, Any]:
        return {"version": RECORD_VERSION, "pools": {k: v.to_json() for k, v in sorted(self.pools.items())}}

    def dumps(self) -> bytes:
        return json.dumps(self.to_doc(), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, blob: bytes) -> ControllerRecord:
        return cls.from_doc(json.loads(blob))

    @classmethod
    def from_doc(cls, doc: Any) -> ControllerRecord:
        """Decode the saved record strictly: anything malformed is one ``ValueError`` line that
        names the field and the value (never a traceback from deep inside a tick); keys a newer
        controller added are ignored."""
        if not isinstance(doc, dict):
            raise ValueError(f"controller record: is not a JSON object (value: {_short(doc)}); fix: {REBUILD}")
        if doc.get("version") != RECORD_VERSION:
            raise ValueError(f"controller record version {doc.get('version')!r} is not {RECORD_VERSION}; fix: {REBUILD}")
        try:
            pools = _POOLS.validate_python(doc.get("pools", {}))
        except ValidationError as err:
            first = err.errors()[0]
            at = ".".join(_loc_part(part) for part in first["loc"])
            raise ValueError(
                f"controller record pools.{at}: {first['msg']} (value: {_short(first.get('input'))}); fix: {REBUILD}"
            ) from None
        return cls(pools=pools)


#: What to do about a record that cannot be read: the cloud holds the truth it summarises.
REBUILD = "delete the record to rebuild it from the cloud (the drains and backoffs it held start over)"
_POOLS = TypeAdapter(dict[str, PoolState])


def _loc_part(part: str | int) -> str:
    """A path part as the error line shows it: a key that is not a plain name is quoted (a key with a
    line break would otherwise split the one line)."""
    return str(part) if isinstance(part, int) or re.fullmatch(r"[\w-]+", part) else json.dumps(part)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
