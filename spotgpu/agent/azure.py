"""Azure: Scheduled Events polling, per-VM filtering, acknowledgement, identity.

Scheduled Events is poll-only (the docs recommend once a second; IMDS allows
about 5 requests/s per VM). Each document carries a ``DocumentIncarnation`` that
changes with any change, so an unchanged incarnation is skipped whole. Events
list the ``Resources`` they affect; a scale set's events can name other VMs, and
approving an event releases it for *all* its resources, so the agent only acts on
and approves events that name this VM (IMDS ``compute.name``).

Real answers the agent reads as they are meant: an idle poll answered with HTTP 200 and an
empty body (seen on AKS nodes, aks-node-termination-handler) is "no events"; ``NotBefore``
in RFC 1123 or ISO-8601 (Microsoft's Scheduled Events mock server writes the latter); an
``EventType`` this agent does not know is the safest kind (the VM ends), never approved
(approving an event it cannot read could start it early); ``Completed`` and ``Canceled``
(Event Grid and Resource Graph statuses) mean the event no longer applies.
"""

from __future__ import annotations

import json
import logging
import time

from spotgpu.agent.events import InterruptionEvent, NoticeWithdrawn, since, withdrawn
from spotgpu.agent.http import MetadataError, MetadataHttp
from spotgpu.agent.identity import VmIdentity
from spotgpu.agent.timeparse import cloud_time
from spotgpu.contract.interruptions import InterruptionKind

DEFAULT_BASE_URL = "http://169.254.169.254"
EVENTS_PATH = "/metadata/scheduledevents?api-version=2020-07-01"
COMPUTE_PATH = "/metadata/instance/compute?api-version=2021-02-01"
HEADERS = {"Metadata": "true"}
#: The fastest Scheduled Events poll the agent allows. IMDS answers about 5 requests/s per VM
#: (429 above), and the agent's other IMDS calls (compute, StartRequests) need room beside the
#: poll: at most 4 polls/s. The docs recommend once a second, the default.
MIN_POLL_INTERVAL_SECONDS = 0.25
#: The first Scheduled Events call enables the service and "may take up to 2 minutes".
FIRST_CALL_TIMEOUT_SECONDS = 120.0

log = logging.getLogger(__name__)

EVENT_KINDS = {
    "Preempt": InterruptionKind.PREEMPT,
    "Terminate": InterruptionKind.TERMINATE,
    "Freeze": InterruptionKind.MAINTENANCE,
    "Reboot": InterruptionKind.MAINTENANCE,
    "Redeploy": InterruptionKind.MAINTENANCE,
}
#: An EventType not in :data:`EVENT_KINDS` is read as the most disruptive: the VM ends.
UNKNOWN_EVENT_KIND = InterruptionKind.TERMINATE
#: Statuses of an event that no longer applies (Event Grid / Resource Graph only, per the docs).
DONE_STATUSES = ("Completed", "Canceled")


class AzureImdsClient:
    def __init__(self, http: MetadataHttp) -> None:
        self.http = http

    def _json(self, path: str, timeout: float | None = None) -> dict[str, object]:
        resp = self.http.request("GET", path, headers=HEADERS, timeout=timeout)
        if resp.status != 200:
            raise MetadataError(f"http_{resp.status}", f"GET {path} answered HTTP {resp.status}")
        doc = resp.json()
        if not isinstance(doc, dict):
            raise MetadataError("malformed", f"GET {path}: expected a JSON object")
        return doc

    def scheduled_events(self, timeout: float | None = None) -> dict[str, object]:
        """The document; ``{}`` for HTTP 200 with an empty body (an idle answer, not an error)."""
        resp = self.http.request("GET", EVENTS_PATH, headers=HEADERS, timeout=timeout)
        if resp.status != 200:
            raise MetadataError(f"http_{resp.status}", f"GET {EVENTS_PATH} answered HTTP {resp.status}")
        if not resp.body.strip():
            return {}
        doc = resp.json()
        if not isinstance(doc, dict):
            raise MetadataError("malformed", f"GET {EVENTS_PATH}: expected a JSON object")
        return doc

    def compute(self) -> dict[str, object]:
        return self._json(COMPUTE_PATH)

    def start_events(self, event_ids: list[str]) -> None:
        """Approve events (``StartRequests``); 200 even if already approved."""
        body = json.dumps({"StartRequests": [{"EventId": eid} for eid in event_ids]}).encode()
        resp = self.http.request(
            "POST", EVENTS_PATH, headers={**HEADERS, "Content-Type": "application/json"}, body=body
        )
        if resp.status != 200:
            raise MetadataError(f"http_{resp.status}", f"POST StartRequests answered HTTP {resp.status}")


class ScheduledEventsMonitor:
    """Turns each new Scheduled Events document into notices for this VM only."""

    source = "azure/scheduledevents"

    def __init__(
        self,
        client: AzureImdsClient,
        vm_name: str | None = None,
        interval: float = 1.0,
        read_timeout: float | None = None,
    ) -> None:
        if interval < MIN_POLL_INTERVAL_SECONDS:
            raise ValueError(
                f"poll interval {interval} s would exceed IMDS's 5 requests/s; use >= {MIN_POLL_INTERVAL_SECONDS}"
            )
        self.client = client
        self.vm_name = vm_name
        self.interval = interval
        self.read_timeout = read_timeout  # None: the client's request timeout
        self.last_clean: float | None = None
        self.incarnation: object = None
        self.skipped_other_vm = 0
        self.skipped_malformed = 0
        self.enabled = False
        #: This VM's events in the last document read; one missing from a new document is withdrawn.
        self.active: set[str] = set()

    def _this_vm(self) -> str:
        if not self.vm_name:
            name = self.client.compute().get("name")
            if not isinstance(name, str) or not name:
                raise MetadataError("malformed", "IMDS compute.name is missing; cannot match Resources")
            self.vm_name = name
        return self.vm_name

    def check(self) -> list[InterruptionEvent | NoticeWithdrawn]:
        vm = self._this_vm()
        # Until one call has succeeded, wait as long as enabling the service may take.
        doc = self.client.scheduled_events(self.read_timeout if self.enabled else FIRST_CALL_TIMEOUT_SECONDS)
        self.enabled = True
        if not doc:  # an empty body: no events (and no incarnation to compare with)
            doc = {"DocumentIncarnation": None, "Events": []}
        incarnation, events = doc.get("DocumentIncarnation"), doc.get("Events")
        if not isinstance(incarnation, int | None) or not isinstance(events, list):
            raise MetadataError("malformed", "scheduled events: DocumentIncarnation/Events missing")
        if incarnation is not None and incarnation == self.incarnation:
            return []
        now = time.time()
        found = [ev for ev in (self._parse(raw, vm, now) for raw in events) if ev is not None]
        self.incarnation = incarnation  # only after the whole document was read
        present = {ev.event_id for ev in found}
        gone, self.active = tuple(sorted(self.active - present)), present
        return [*found, *withdrawn(self.source, gone, now)]

    def _parse(self, raw: object, vm: str, now: float) -> InterruptionEvent | None:
        if not isinstance(raw, dict):
            self.skipped_malformed += 1
            return None
        event_id, event_type, resources = raw.get("EventId"), raw.get("EventType"), raw.get("Resources")
        if not isinstance(event_id, str) or not isinstance(resources, list):
            self.skipped_malformed += 1
            return None
        if vm not in resources:
            self.skipped_other_vm += 1
            return None
        if raw.get("EventStatus") in DONE_STATUSES:
            return None
        unparsed = None
        try:
            not_before = cloud_time(raw.get("NotBefore"), "NotBefore")
        except MetadataError as err:
            # Never drop an eviction for its date: act now, with the contract's minimum notice.
            log.warning("%s; acting on event %s at once with the contract's minimum notice", err, event_id)
            not_before, unparsed = None, repr(raw.get("NotBefore"))
        known = event_type in EVENT_KINDS
        kind = EVENT_KINDS[str(event_type)] if known else UNKNOWN_EVENT_KIND
        if not known:
            log.warning("event %s: unknown EventType %r, read as %s and never approved", event_id, event_type, kind)
        started = raw.get("EventStatus") == "Started"
        return InterruptionEvent(
            event_id=event_id,
            kind=kind,
            source=self.source,
            detected_at=now,
            raw=raw,
            # "Started" (or no NotBefore) means it is happening now.
            cloud_deadline=None if unparsed else now if started or not_before is None else not_before,
            since_last_clean_poll=since(self.last_clean, now),
            acknowledge_ids=(event_id,) if kind.terminal and known else (),
            unparsed_time=unparsed,
            unknown_value=None if known else str(event_type),
        )


class StartRequestAcknowledger:
    """Approves each terminal event for this VM exactly once, after the drain."""

    def __init__(self, client: AzureImdsClient) -> None:
        self.client = client
        self.approved: set[str] = set()

    def handles(self, event: InterruptionEvent) -> bool:
        return bool(event.acknowledge_ids)

    def acknowledge(self, event: InterruptionEvent) -> None:
        pending = [eid for eid in event.acknowledge_ids if eid not in self.approved]
        if pending:
            self.client.start_events(pending)
            self.approved.update(pending)


def fetch_identity(client: AzureImdsClient) -> VmIdentity:
    """name, vmSize, zone, location, vmId and priority (Spot | Regular | empty)."""
    c = client.compute()

    def field(key: str) -> str:
        value = c.get(key, "")
        return value if isinstance(value, str) else str(value)

    return VmIdentity(
        provider="azure",
        instance_id=field("vmId"),
        instance_type=field("vmSize"),
        zone=field("zone"),
        region=field("location"),
        capacity="spot" if field("priority").lower() == "spot" else "on-demand",
        name=field("name"),
    )
