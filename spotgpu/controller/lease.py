"""One writer per pool: a lease on the controller's record, with a fencing token.

Two controllers on one record (a schedule that fired twice, a long-lived replica
left running next to a new one, a paused process that wakes up) must not both
act. The lease is one small JSON object, ``controller/lease.json`` next to the
record, taken and renewed with the store's own conditional writes (S3
``If-None-Match``/``If-Match``, GCS generation preconditions, Azure ``If-Match``
ETags, through obstore; ``flock`` on ``file://``)::

    {"holder": "<uuid>", "token": 7, "expiresAt": 1733000000.0, "renewedAt": ..., "ttlSeconds": 120}

* **Take.** No lease, a released one, or one whose ``expiresAt`` is more than
  ``maxClockSkewSeconds`` in the past: write ``token + 1`` conditionally on the
  version read. Of two contenders exactly one write succeeds.
* **Renew.** The holder rewrites its own lease conditionally, same token.
* **Refuse.** Anyone else's live lease: the tick does nothing and says who holds
  it until when.
* **Fence.** Right after taking the lease, the new holder rewrites the record
  with its token (conditionally on the record's version). Every later record
  write is conditional on the version this holder read, so a write from an older
  holder that is still in flight is refused by the store, and a record carrying a
  higher token than ours means we were fenced out.
* **Local deadline.** The holder trusts its lease only until
  ``monotonic() at the start of the take + ttlSeconds``: before every write
  (record, drain request, scheduler hook) and every cloud action it checks that
  deadline, so a process paused past its lease writes nothing when it wakes.

What this rests on: (1) the store's conditional writes are linearizable per
object (true of S3, GCS and Azure Blob since they became strongly consistent);
(2) wall clocks of contenders differ by less than ``maxClockSkewSeconds``,
because a contender judges ``expiresAt`` with its own wall clock; (3) clock *rate*
drift over one TTL is negligible next to that skew. A holder that dies without
releasing delays the next one by at most ``ttlSeconds + maxClockSkewSeconds``.
Cloud calls are not fenced by the cloud itself: a call already sent when the
deadline passes still lands. They are idempotent "set desired to N" calls, and
the next holder re-observes the cloud before acting.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spotgpu.contract.state_store import ConditionalJsonStore, StaleRecordError, Versioned

LEASE_KEY = "controller/lease.json"
#: Field every write under a lease carries; the record's value is checked on read.
FENCE_FIELD = "fencingToken"


class LeaseLost(RuntimeError):
    """This process no longer holds the lease (deadline passed, or fenced out); it must write nothing."""


@dataclass(frozen=True)
class LeaseVerdict:
    held: bool
    token: int
    reason: str


class Lease:
    """Take, renew, check and release the lease for one process (``holder`` is unique per process)."""

    def __init__(
        self,
        store: ConditionalJsonStore,
        ttl_seconds: float = 120.0,
        max_clock_skew_seconds: float = 10.0,
        holder: str | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0 or max_clock_skew_seconds < 0:
            raise ValueError("lease ttlSeconds must be > 0 and maxClockSkewSeconds >= 0")
        self.store = store
        self.ttl = ttl_seconds
        self.skew = max_clock_skew_seconds
        self.holder = holder or uuid.uuid4().hex
        self._wall, self._mono = wall, monotonic
        self._current: Versioned | None = None  # our lease object as last written
        self.token = 0
        self._deadline = float("-inf")  # monotonic time after which we write nothing

    # -- taking and keeping ---------------------------------------------------
    def acquire(self) -> LeaseVerdict:
        """Take or renew the lease; on refusal nothing was written and ``reason`` says why."""
        started_mono, started_wall = self._mono(), self._wall()
        try:
            seen = self.store.read(LEASE_KEY)
        except Exception as err:  # store unreachable: we cannot know, so we do not act
            self._deadline = float("-inf")
            return LeaseVerdict(False, self.token, f"cannot read the lease: {str(err)[:200]}")
        token: int
        if seen is None or seen.doc.get("released") or started_wall > float(seen.doc.get("expiresAt", 0)) + self.skew:
            token = int(seen.doc.get("token", 0)) + 1 if seen is not None else 1
            why = "taken" if seen is None else f"taken over from {str(seen.doc.get('holder'))[:8]} (token {token - 1})"
        elif seen.doc.get("holder") == self.holder and seen.doc.get("token") == self.token:
            if self._current is None or seen.version != self._current.version:
                return self._lose(f"lease object changed under holder {self.holder[:8]}; this tick does nothing")
            token, why = self.token, "renewed"
        else:
            left = float(seen.doc["expiresAt"]) - started_wall
            self._deadline = float("-inf")
            return LeaseVerdict(
                False,
                self.token,
                f"lease held by {str(seen.doc.get('holder'))[:8]} (token {seen.doc.get('token')}) for another "
                f"{left:.1f}s (+{self.skew:g}s skew allowance); this tick does nothing",
            )
        doc = {
            "holder": self.holder,
            "token": token,
            "expiresAt": started_wall + self.ttl,
            "renewedAt": started_wall,
            "ttlSeconds": self.ttl,
        }
        try:
            self._current = self.store.write_if(LEASE_KEY, doc, seen)
        except StaleRecordError:
            return self._lose("another controller wrote the lease at the same moment; this tick does nothing")
        except Exception as err:
            return self._lose(f"cannot write the lease: {str(err)[:200]}")
        self.token = token
        self._deadline = started_mono + self.ttl
        return LeaseVerdict(True, token, why)

    def release(self) -> None:
        """Give the lease up (end of a one-shot tick) so the next run need not wait for expiry."""
        if self._current is None or not self.valid():
            return
        doc = {**self._current.doc, "released": True, "expiresAt": self._wall()}
        # Stale: someone took it already. Any other failure: the next run waits for expiry instead.
        with contextlib.suppress(Exception):
            self.store.write_if(LEASE_KEY, doc, self._current)
        self._current, self._deadline = None, float("-inf")

    def _lose(self, reason: str) -> LeaseVerdict:
        self._current, self._deadline = None, float("-inf")
        return LeaseVerdict(False, self.token, reason)

    # -- guarding writes -------------------------------------------------------
    def valid(self) -> bool:
        return self._mono() < self._deadline

    def check(self, what: str) -> None:
        """Raise LeaseLost unless the lease is still ours by the local deadline."""
        if not self.valid():
            raise LeaseLost(f"lease token {self.token} expired or lost before {what}; not writing")

    def seconds_left(self) -> float:
        return self._deadline - self._mono()


class LeaseGuardedAdapter:
    """A cloud adapter that refuses to act once the lease's local deadline has passed."""

    def __init__(self, inner: Any, lease: Lease) -> None:
        self.inner, self.lease = inner, lease

    def observe(self, now: float) -> Any:
        return self.inner.observe(now)

    def apply(self, action: Any) -> None:
        self.lease.check(f"{type(action).__name__}")
        self.inner.apply(action)

    def ack(self, receipts: tuple[object, ...]) -> None:
        self.lease.check("acknowledging events")
        self.inner.ack(receipts)


class FencedStore:
    """The store the controller writes through while it holds a lease.

    Every write first checks the lease's local deadline and carries the fencing
    token. Writes to ``fenced_keys`` (the record) are conditional on the version
    this process last read or wrote, so an older holder's in-flight write and a
    write after someone else fenced the record both fail with StaleRecordError.
    """

    def __init__(self, inner: ConditionalJsonStore, lease: Lease, fenced_keys: tuple[str, ...]) -> None:
        self.inner, self.lease, self.fenced_keys = inner, lease, fenced_keys
        self._seen: dict[str, Versioned | None] = {}

    def fence(self) -> None:
        """Stamp our token on every fenced key, so no older holder can write them again."""
        for key in self.fenced_keys:
            for _ in range(5):
                current = self.inner.read(key)
                if current is not None and int(current.doc.get(FENCE_FIELD, 0)) > self.lease.token:
                    raise LeaseLost(f"{key} carries token {current.doc[FENCE_FIELD]} > ours ({self.lease.token})")
                if current is None:
                    self._seen[key] = None
                    break
                self.lease.check(f"fencing {key}")
                try:
                    self._seen[key] = self.inner.write_if(key, {**current.doc, FENCE_FIELD: self.lease.token}, current)
                    break
                except StaleRecordError:
                    continue  # an older holder's write landed first; read it and fence again
            else:
                raise LeaseLost(f"{key} kept changing while fencing; another writer is active")

    def get(self, key: str) -> dict[str, Any] | None:
        if key not in self.fenced_keys:
            return self.inner.get(key)
        current = self.inner.read(key)
        if current is not None and int(current.doc.get(FENCE_FIELD, 0)) > self.lease.token:
            raise LeaseLost(f"{key} carries token {current.doc[FENCE_FIELD]} > ours ({self.lease.token})")
        self._seen[key] = current
        return None if current is None else current.doc

    def put(self, key: str, doc: dict[str, Any]) -> None:
        self.lease.check(f"writing {key}")
        stamped = {**doc, FENCE_FIELD: self.lease.token}
        if key not in self.fenced_keys:
            self.inner.put(key, stamped)
            return
        if key not in self._seen:
            raise LeaseLost(f"{key} written without being read under this lease; read it first")
        try:
            self._seen[key] = self.inner.write_if(key, stamped, self._seen[key])
        except StaleRecordError as err:
            raise LeaseLost(f"{key} was changed by another holder; this write is refused") from err

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)
