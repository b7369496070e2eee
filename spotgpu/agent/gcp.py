"""Google Cloud: metadata-server hanging GETs on ``preempted`` and ``maintenance-event``.

A hanging GET (``?wait_for_change=true``) returns the moment the value changes,
so detection costs no polling delay. Passing ``last_etag`` makes the server
answer at once if the value changed while we were between requests (or while a
request failed), so no change is missed; ``timeout_sec`` bounds each hang.

A hanging GET can also stall: the server accepts it and never answers. Its read
deadline is therefore ``timeout_sec`` plus a second, and beside each hanging GET a
plain read of the same value (no ``wait_for_change``) runs every few seconds in its
own thread, so a stall hides a notice for at most one plain-read interval.
"""

from __future__ import annotations

import time
from dataclasses import replace
from urllib.parse import urlencode

from spotgpu.agent.events import InterruptionEvent, NoticeWithdrawn
from spotgpu.agent.http import MetadataError, MetadataHttp, Response
from spotgpu.agent.identity import VmIdentity
from spotgpu.contract.interruptions import InterruptionKind

DEFAULT_BASE_URL = "http://metadata.google.internal"
PREFIX = "/computeMetadata/v1/"
HEADERS = {"Metadata-Flavor": "Google"}
PREEMPTED_PATH = "instance/preempted"
MAINTENANCE_PATH = "instance/maintenance-event"
#: A hanging GET's read deadline past ``timeout_sec``: the server answers by then, so a
#: later answer means the request stalled.
HANGING_GET_SLACK_SECONDS = 1.0


class GcpMetadataClient:
    def __init__(self, http: MetadataHttp) -> None:
        self.http = http

    def get(
        self, path: str, last_etag: str | None = None, timeout_sec: int = 60, read_timeout: float | None = None
    ) -> Response:
        """Plain GET without an ETag (``read_timeout``, default the request timeout); hanging GET with one."""
        if last_etag is None:
            return self._checked(self.http.request("GET", PREFIX + path, headers=HEADERS, timeout=read_timeout), path)
        query = urlencode({"wait_for_change": "true", "last_etag": last_etag, "timeout_sec": timeout_sec})
        resp = self.http.request(
            "GET", f"{PREFIX}{path}?{query}", headers=HEADERS, timeout=timeout_sec + HANGING_GET_SLACK_SECONDS
        )
        return self._checked(resp, path)

    @staticmethod
    def _checked(resp: Response, path: str) -> Response:
        if resp.status != 200:
            raise MetadataError(f"http_{resp.status}", f"GET {path} answered HTTP {resp.status}")
        return resp

    def text(self, path: str) -> str:
        return self.get(path).text()


class _HangingGetMonitor:
    """Follows one metadata value by ETag; subclasses say which values are notices."""

    source = ""
    path = ""
    interval = 0.0

    def __init__(
        self,
        client: GcpMetadataClient,
        timeout_sec: int = 60,
        plain_every: float | None = None,
        read_timeout: float | None = None,
    ) -> None:
        self.client = client
        self.timeout_sec = timeout_sec
        self.read_timeout = read_timeout  # plain reads; None: the client's request timeout
        #: Set: this instance is the stall guard, a plain read every ``plain_every`` seconds.
        self.plain = plain_every is not None
        self.interval = plain_every or 0.0
        self.etag: str | None = None
        self.last_clean: float | None = None
        #: The notice this instance last saw; the value back to normal withdraws it.
        self.active: str | None = None

    @classmethod
    def plain_reads(
        cls, client: GcpMetadataClient, every: float, read_timeout: float | None = None
    ) -> _HangingGetMonitor:
        """The stall guard beside the hanging GET: the same value, read plainly every ``every`` s."""
        return cls(client, plain_every=every, read_timeout=read_timeout)

    def check(self) -> list[InterruptionEvent | NoticeWithdrawn]:
        was_hanging = self.etag is not None and not self.plain
        resp = self.client.get(self.path, None if self.plain else self.etag, self.timeout_sec, self.read_timeout)
        value = resp.text()
        etag = resp.headers.get("etag")
        if not etag:
            raise MetadataError("malformed", f"GET {self.path}: no ETag header")
        event = self.interpret(value, resp)
        if not self.plain:
            # Only once the value was read: after a spoiled answer the old ETag makes the
            # next hanging GET answer the change at once.
            self.etag = etag
        if event is None:
            gone, self.active = self.active, None
            return [NoticeWithdrawn(self.source, (gone,), time.time())] if gone else []
        self.active = event.event_id
        if not was_hanging and self.last_clean is not None:
            event = _with_clean(event, event.detected_at - self.last_clean)
        return [event]

    def interpret(self, value: str, resp: Response) -> InterruptionEvent | None:  # pragma: no cover
        raise NotImplementedError


def _with_clean(event: InterruptionEvent, since: float) -> InterruptionEvent:
    return replace(event, since_last_clean_poll=since)


class PreemptedMonitor(_HangingGetMonitor):
    """``instance/preempted`` turns TRUE at the start of the (0 s or 120 s) notice."""

    source = "gcp/preempted"
    path = PREEMPTED_PATH

    def interpret(self, value: str, resp: Response) -> InterruptionEvent | None:
        if value == "FALSE":
            return None
        if value != "TRUE":
            raise MetadataError("malformed", f"instance/preempted: unexpected value {value!r}")
        # The server gives no timestamp: the deadline comes from the contract.
        return InterruptionEvent("preempted", InterruptionKind.PREEMPT, self.source, time.time(), value)


class MaintenanceMonitor(_HangingGetMonitor):
    """``instance/maintenance-event``: host maintenance (GPU VMs get a 1-hour stopping notice)."""

    source = "gcp/maintenance-event"
    path = MAINTENANCE_PATH

    def interpret(self, value: str, resp: Response) -> InterruptionEvent | None:
        if value == "NONE":
            return None
        if value not in ("MIGRATE_ON_HOST_MAINTENANCE", "TERMINATE_ON_HOST_MAINTENANCE"):
            raise MetadataError("malformed", f"instance/maintenance-event: unexpected value {value!r}")
        etag = resp.headers.get("etag", "")
        return InterruptionEvent(f"{value}@{etag}", InterruptionKind.MAINTENANCE, self.source, time.time(), value)


def fetch_identity(client: GcpMetadataClient) -> VmIdentity:
    """id, machine-type, zone (both as full resource paths) and scheduling/preemptible."""
    machine_type = client.text("instance/machine-type").rsplit("/", 1)[-1]
    zone = client.text("instance/zone").rsplit("/", 1)[-1]
    preemptible = client.text("instance/scheduling/preemptible").upper() == "TRUE"
    return VmIdentity(
        provider="gcp",
        instance_id=client.text("instance/id"),
        instance_type=machine_type,
        zone=zone,
        region=zone.rsplit("-", 1)[0],
        capacity="spot" if preemptible else "on-demand",
        name=client.text("instance/name"),
    )
