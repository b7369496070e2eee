"""Google Cloud: metadata-server hanging GETs on ``preempted`` and ``maintenance-event``, and
a poll of ``upcoming-maintenance``.

A hanging GET (``?wait_for_change=true``) returns the moment the value changes,
so detection costs no polling delay. Passing ``last_etag`` makes the server
answer at once if the value changed while we were between requests (or while a
request failed), so no change is missed; ``timeout_sec`` bounds each hang.

A hanging GET can also stall: the server accepts it and never answers. Its read
deadline is therefore ``timeout_sec`` plus a second, and beside each hanging GET a
plain read of the same value (no ``wait_for_change``) runs every few seconds in its
own thread, so a stall hides a notice for at most one plain-read interval.

A notice's identity is the value's transition (:mod:`spotgpu.agent.transitions`), shared by
the hanging GET and its stall guard, never the ETag alone. A hanging GET's answer only says the
value changed: the value is then read plainly under the tracker's lock, so the two readers
observe in the order the server answered. Never the ETag alone: a server that derives the ETag
from the value serves the same ETag when the value comes back. A value this agent does not
know is a notice of the safest kind the source could mean, never an error loop.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from spotgpu.agent.events import InterruptionEvent, NoticeWithdrawn, since, withdrawn
from spotgpu.agent.http import MetadataError, MetadataHttp, Response
from spotgpu.agent.identity import VmIdentity
from spotgpu.agent.timeparse import cloud_time
from spotgpu.agent.transitions import Transitions
from spotgpu.contract.interruptions import InterruptionKind

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://metadata.google.internal"
PREFIX = "/computeMetadata/v1/"
HEADERS = {"Metadata-Flavor": "Google"}
PREEMPTED_PATH = "instance/preempted"
MAINTENANCE_PATH = "instance/maintenance-event"
UPCOMING_MAINTENANCE_PATH = "instance/upcoming-maintenance?alt=json"
#: A hanging GET's read deadline past ``timeout_sec``: the server answers by then, so a
#: later answer means the request stalled.
HANGING_GET_SLACK_SECONDS = 1.0
#: What an enumeration value looks like (``TERMINATE_ON_HOST_MAINTENANCE``, ``TRUE``): a value of
#: this shape that the agent does not know is a notice; anything else is a spoiled answer.
_TOKEN = re.compile(r"^[A-Za-z][A-Za-z0-9_:.-]{0,127}$")


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

    def raw(self, path: str, read_timeout: float | None = None) -> Response:
        """A plain GET whose status the caller judges (``upcoming-maintenance`` answers 503 when idle)."""
        return self.http.request("GET", PREFIX + path, headers=HEADERS, timeout=read_timeout)


@dataclass(frozen=True)
class Reading:
    """What one value means: the notice kind, the lead its docs give, and whether it is known."""

    kind: InterruptionKind
    documented_lead: float | None = None
    unknown: bool = False


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
        transitions: Transitions | None = None,
    ) -> None:
        self.client = client
        #: The value's runs, shared with the other reader of the same value.
        self.transitions = transitions or Transitions()
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
        cls,
        client: GcpMetadataClient,
        every: float,
        read_timeout: float | None = None,
        transitions: Transitions | None = None,
    ) -> _HangingGetMonitor:
        """The stall guard beside the hanging GET: the same value, read plainly every ``every`` s.

        Pass the hanging GET's ``transitions`` so both name each notice alike.
        """
        return cls(client, plain_every=every, read_timeout=read_timeout, transitions=transitions)

    def check(self) -> list[InterruptionEvent | NoticeWithdrawn]:
        was_hanging = self.etag is not None and not self.plain
        if was_hanging:
            # The hanging GET's answer only wakes us: the value that counts is read again below,
            # with the other reader held off, so a paused reader never observes a stale value.
            self._value_of(self.client.get(self.path, self.etag, self.timeout_sec))
        with self.transitions.in_order:
            value, etag = self._value_of(self.client.get(self.path, None, self.timeout_sec, self.read_timeout))
            run, began = self.transitions.enter(value)
        reading = self.interpret(value)
        if not self.plain:
            # Only once the value was read: after a spoiled answer the old ETag makes the
            # next hanging GET answer the change at once.
            self.etag = etag
        now = time.time()
        if reading is None:
            gone, self.active = self.active, None
            return withdrawn(self.source, gone, now)
        if reading.unknown and began:  # once per run, not once per read of either reader
            log.warning("%s: unknown value %r, read as %s", self.source, value, reading.kind)
        event = InterruptionEvent(
            f"{value}#{run}",
            reading.kind,
            self.source,
            now,
            value,
            documented_lead=reading.documented_lead,
            unknown_value=value if reading.unknown else None,
        )
        self.active = event.event_id
        if not was_hanging and self.last_clean is not None:
            event = _with_clean(event, event.detected_at - self.last_clean)
        return [event]

    def _value_of(self, resp: Response) -> tuple[str, str]:
        """The value and ETag of an answer; a spoiled answer is a failed read."""
        value = resp.text()
        etag = resp.headers.get("etag")
        if not etag:
            raise MetadataError("malformed", f"GET {self.path}: no ETag header")
        if value and not _TOKEN.match(value):
            # Not a value the server could mean (a truncated or garbled body): a failed read.
            raise MetadataError("malformed", f"GET {self.path}: unexpected value {value[:80]!r}")
        return value, etag

    def interpret(self, value: str) -> Reading | None:  # pragma: no cover
        """The notice a value means, or None for the value at rest."""
        raise NotImplementedError


def _with_clean(event: InterruptionEvent, since: float) -> InterruptionEvent:
    return replace(event, since_last_clean_poll=since)


class PreemptedMonitor(_HangingGetMonitor):
    """``instance/preempted`` turns TRUE at the start of the (0 s or 120 s) notice.

    The server gives no timestamp: the deadline comes from the contract. Any value but
    ``FALSE`` and ``TRUE`` is read as ``TRUE`` (the safest reading of this flag).
    """

    source = "gcp/preempted"
    path = PREEMPTED_PATH

    def interpret(self, value: str) -> Reading | None:
        if value in ("FALSE", ""):
            return None
        return Reading(InterruptionKind.PREEMPT, unknown=value != "TRUE")


#: ``maintenance-event`` values (Compute Engine, "Query metadata server for maintenance event
#: notices") and the lead before the event each is documented to give: a migration follows the
#: value's flip by about 60 s; GPU VMs get a 1-hour stopping notice.
MAINTENANCE_LEADS = {"MIGRATE_ON_HOST_MAINTENANCE": 60.0, "TERMINATE_ON_HOST_MAINTENANCE": 3600.0}
#: An unknown value (Google's own sample names SHUTDOWN_ON_HOST_MAINTENANCE) gets the shortest.
UNKNOWN_MAINTENANCE_LEAD = min(MAINTENANCE_LEADS.values())


class MaintenanceMonitor(_HangingGetMonitor):
    """``instance/maintenance-event``: host maintenance ahead (**maintenance**, an early notice)."""

    source = "gcp/maintenance-event"
    path = MAINTENANCE_PATH

    def interpret(self, value: str) -> Reading | None:
        if value in ("NONE", ""):
            return None
        lead = MAINTENANCE_LEADS.get(value)
        if lead is None:
            return Reading(InterruptionKind.MAINTENANCE, UNKNOWN_MAINTENANCE_LEAD, unknown=True)
        return Reading(InterruptionKind.MAINTENANCE, lead)


#: ``upcoming-maintenance`` ``type`` and ``maintenance_status`` values (Compute Engine, "Monitor
#: and plan for a host maintenance event"); others are logged and still read as a notice.
UPCOMING_TYPES = ("SCHEDULED", "UNSCHEDULED")
UPCOMING_STATUSES = ("PENDING", "ONGOING")


class UpcomingMaintenanceMonitor:
    """``instance/upcoming-maintenance?alt=json``: host maintenance planned days ahead.

    A notice is a JSON object with a window (``window_start_time``; the API's camelCase names
    are read too): **maintenance**, due at the window's start (announced days ahead, so no lead
    is implausible; a window already open is due now). Its identity is the window, so a
    rescheduled window is a new notice and the old one is withdrawn. No notice is ``{}``,
    ``NONE`` or ``null``, or HTTP 503 with "no notifications have been received yet" (what the
    server answers before any notice, as Google's own SAP agent reads it); 404 means the
    machine type does not offer the key. Polled plainly: the notice is days ahead.
    """

    source = "gcp/upcoming-maintenance"

    def __init__(self, client: GcpMetadataClient, every: float, read_timeout: float | None = None) -> None:
        self.client = client
        self.interval = every
        self.read_timeout = read_timeout
        self.last_clean: float | None = None
        self.active: str | None = None
        self.unsupported = False

    def check(self) -> list[InterruptionEvent | NoticeWithdrawn]:
        resp = self.client.raw(UPCOMING_MAINTENANCE_PATH, self.read_timeout)
        now = time.time()
        doc = self._document(resp)
        window = _first(doc, "window_start_time", "windowStartTime", "startTime") if doc else None
        if not doc or window is None:
            gone, self.active = self.active, None
            return withdrawn(self.source, gone, now)
        kind_of, status = _first(doc, "type"), _first(doc, "maintenance_status", "maintenanceStatus")
        unknown = [str(v) for v in (kind_of, status) if v is not None and v not in (*UPCOMING_TYPES, *UPCOMING_STATUSES)]
        try:
            start, unparsed = cloud_time(window, "upcoming-maintenance.window_start_time"), None
        except MetadataError as err:
            log.warning("%s; acting on the notice at once", err)
            start, unparsed = None, repr(window)
        event = InterruptionEvent(
            event_id=f"{kind_of or 'MAINTENANCE'}@{window}",
            kind=InterruptionKind.MAINTENANCE,
            source=self.source,
            detected_at=now,
            raw=doc,
            cloud_deadline=start,
            since_last_clean_poll=since(self.last_clean, now),
            unparsed_time=unparsed,
            max_lead=math.inf,
            unknown_value=",".join(unknown) or None,
        )
        gone, self.active = self.active, event.event_id
        if gone and gone != event.event_id:
            return [event, *withdrawn(self.source, gone, now)]
        return [event]

    def _document(self, resp: Response) -> dict[str, object] | None:
        if resp.status == 404:
            if not self.unsupported:
                log.info("%s: not offered on this machine type (404); no upcoming maintenance to watch", self.source)
            self.unsupported = True
            return None
        text = resp.text()
        if resp.status == 503 and "no notifications" in text.lower():
            return None
        if resp.status != 200:
            raise MetadataError(f"http_{resp.status}", f"GET {UPCOMING_MAINTENANCE_PATH} answered HTTP {resp.status}")
        if text in ("", "NONE", '"NONE"', "null"):
            return None
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise MetadataError("malformed", f"GET {UPCOMING_MAINTENANCE_PATH}: not JSON ({err})") from err
        if isinstance(doc, dict) and isinstance(doc.get("Upcoming maintenance"), dict):
            doc = doc["Upcoming maintenance"]  # the form Google's page prints
        if not isinstance(doc, dict):
            raise MetadataError("malformed", f"GET {UPCOMING_MAINTENANCE_PATH}: expected a JSON object")
        return doc if "error" not in doc else None


def _first(doc: dict[str, object], *keys: str) -> object:
    return next((doc[k] for k in keys if doc.get(k) not in (None, "")), None)


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
