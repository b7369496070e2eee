"""Loopback fakes of the three metadata services, for tests, benchmarks and demos.

Each fake is a threaded ``http.server`` on 127.0.0.1 that serves just the paths
the agent reads, and can misbehave on request: ``inject(path_part, mode, count)``
makes the next ``count`` matching requests time out (no answer), answer late
(``slow``), stall (accept, never answer), answer 500 or 401, drop the connection, or
return malformed JSON. ``path_part`` matches the query too (``wait_for_change`` picks
GCP's hanging GETs). Notices are raised with ``raise_*`` methods that record
the raise time, so latency is measured from the moment the notice exists.

They answer what the real services answer, not only the happy path: Azure's idle HTTP 200
with an empty body (``FakeAzureImds(empty_when_idle=True)``, as AKS nodes answer), GCP ETags
derived from the value (``FakeGcpMetadata(etag_mode="hash")``, as a third-party emulator
does) or a counter, GCE ``upcoming-maintenance`` (503 "no notifications" until one is set),
AWS scheduled events and the Auto Scaling target lifecycle state. ``serve(path, status,
body)`` answers one path with an exact payload (a published sample) after the service's
own checks (token, header).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: timeout: no answer for ``timeout_delay``, then the connection closes; slow: answer after it;
#: stall: accept and never answer (until the fake stops); 500/401: that status; malformed: a
#: truncated JSON body; drop: close the connection without an answer (a reset).
FAULT_MODES = ("timeout", "slow", "stall", "500", "401", "malformed", "drop")


class _Handler(BaseHTTPRequestHandler):
    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def _dispatch(self, method: str) -> None:
        fake: FakeMetadataServer = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fake.record(method, self.path)

        def answer() -> tuple[int, dict[str, str], bytes]:
            return fake.handle(method, self.path, dict(self.headers.items()), body)

        fault = fake.take_fault(method, self.path)
        if fault is None:
            ready = answer()  # a hanging GET waits in here
            fault = fake.take_fault(method, self.path, on_answer=True)
            if fault is None:
                self.reply(ready[0], ready[2], ready[1])
                return
            answer = lambda: ready  # noqa: E731 - the answer the fault spoils
        self._fault(fake, fault, answer)

    def _fault(
        self, fake: FakeMetadataServer, fault: str, answer: Callable[[], tuple[int, dict[str, str], bytes]]
    ) -> None:
        if fault in ("timeout", "stall", "drop"):
            if fault == "timeout":
                time.sleep(fake.timeout_delay)
            elif fault == "stall":
                fake.stopping.wait()
            self.close_connection = True
            return
        if fault in ("500", "401"):
            self.reply(int(fault), b"fault")
            return
        if fault == "slow":
            time.sleep(fake.timeout_delay)  # then answer normally
        status, headers, payload = answer()
        if fault == "malformed" and status == 200:
            payload = b'{"truncated": '
        self.reply(status, payload, headers)

    def reply(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeMetadataServer


class FakeMetadataServer:
    """Common plumbing: a loopback server, a request log, and fault injection."""

    def __init__(self, timeout_delay: float = 3.0) -> None:
        self.lock = threading.Condition()
        self.requests: list[tuple[float, str, str]] = []
        self.faults: list[list[Any]] = []  # [path_part, mode, remaining, method or None, on_answer]
        self.timeout_delay = timeout_delay
        self.clock_skew = 0.0  # seconds added to every timestamp the fake writes
        #: path (without query) -> (status, headers, body): exact answers set with serve()
        self.served: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.stopping = threading.Event()  # releases stalled requests
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name=type(self).__name__, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeMetadataServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            self.lock.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeMetadataServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, method: str, path: str) -> None:
        with self.lock:
            self.requests.append((time.time(), method, path))

    def inject(
        self, path_part: str, mode: str, count: int = 1, method: str | None = None, on_answer: bool = False
    ) -> None:
        """The next ``count`` matching requests misbehave. ``on_answer``: when the fake would
        answer, not when the request arrives: a hanging GET then fails as it answers a change."""
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode {mode!r}: use one of {FAULT_MODES}")
        with self.lock:
            self.faults.append([path_part, mode, count, method, on_answer])

    def take_fault(self, method: str, path: str, on_answer: bool = False) -> str | None:
        with self.lock:
            for fault in self.faults:
                if fault[0] in path and fault[2] > 0 and fault[3] in (None, method) and fault[4] == on_answer:
                    fault[2] -= 1
                    return str(fault[1])
        return None

    def serve(self, path: str, status: int, body: bytes | str, headers: dict[str, str] | None = None) -> None:
        """Answer GETs of ``path`` (query ignored) with exactly this, until ``unserve``."""
        with self.lock:
            self.served[path] = (status, headers or {}, body.encode() if isinstance(body, str) else body)
            self.lock.notify_all()

    def unserve(self, path: str) -> None:
        with self.lock:
            self.served.pop(path, None)
            self.lock.notify_all()

    def _served(self, path: str) -> tuple[int, dict[str, str], bytes] | None:
        with self.lock:
            return self.served.get(urlsplit(path).path)

    def count(self, method: str, path_part: str) -> int:
        with self.lock:
            return sum(1 for _, m, p in self.requests if m == method and path_part in p)

    def now(self) -> float:
        return time.time() + self.clock_skew

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        raise NotImplementedError


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def imds_date(ts: float) -> str:
    """AWS scheduled-event dates: Go's ``2 Jan 2006 15:04:05 GMT`` (a one-digit day stays one digit)."""
    moment = datetime.fromtimestamp(ts, UTC)
    return f"{moment.day} {moment.strftime('%b %Y %H:%M:%S')} GMT"


class FakeAwsImds(FakeMetadataServer):
    """IMDSv2 with token TTLs (401 once expired), instance-action, rebalance, scheduled events and
    the Auto Scaling target lifecycle state."""

    def __init__(self, life_cycle: str = "spot", **kw: Any) -> None:
        super().__init__(**kw)
        self.tokens: dict[str, float] = {}
        self.instance_action: dict[str, str] | None = None
        self.rebalance: dict[str, str] | None = None
        #: events/maintenance/scheduled: a JSON list, ``[]`` when none (as IMDS serves it)
        self.scheduled: list[dict[str, str]] = []
        #: autoscaling/target-lifecycle-state: text; None answers 404 (not in a group)
        self.target_lifecycle_state: str | None = "InService"
        self.raised_at: float | None = None
        self.identity = {
            "instance-id": "i-0123456789abcdef0",
            "instance-type": "g5.xlarge",
            "placement/availability-zone": "us-east-1b",
            "placement/region": "us-east-1",
            "instance-life-cycle": life_cycle,
        }

    def raise_spot(self, action: str = "terminate", lead: float = 120.0) -> float:
        with self.lock:
            self.raised_at = time.time()
            self.instance_action = {"action": action, "time": _iso(self.now() + lead)}
            return self.raised_at

    def raise_rebalance(self) -> float:
        with self.lock:
            self.raised_at = time.time()
            self.rebalance = {"noticeTime": _iso(self.now())}
            return self.raised_at

    def raise_scheduled(
        self, code: str = "instance-retirement", not_before_in: float = 600.0, event_id: str | None = None
    ) -> str:
        """An active EC2 scheduled event, dated the way IMDS writes it (``21 Jan 2019 09:00:43 GMT``)."""
        eid = event_id or f"instance-event-{uuid.uuid4().hex[:17]}"
        start = self.now() + not_before_in
        with self.lock:
            self.raised_at = time.time()
            self.scheduled.append(
                {
                    "NotBefore": imds_date(start),
                    "Code": code,
                    "Description": f"The instance is scheduled for {code}",
                    "EventId": eid,
                    "NotAfter": imds_date(start + 7 * 86400),
                    "State": "active",
                }
            )
        return eid

    def set_lifecycle_state(self, state: str | None) -> float:
        with self.lock:
            self.raised_at = time.time()
            self.target_lifecycle_state = state
            return self.raised_at

    def clear(self) -> None:
        with self.lock:
            self.instance_action = self.rebalance = None
            self.scheduled = []
            self.target_lifecycle_state = "InService"
            self.raised_at = None

    def expire_tokens(self) -> None:
        with self.lock:
            self.tokens.clear()

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        lower = {k.lower(): v for k, v in headers.items()}
        if path == "/latest/api/token":
            if method != "PUT" or "x-forwarded-for" in lower:
                return 403, {}, b""
            ttl = int(lower.get("x-aws-ec2-metadata-token-ttl-seconds", "0"))
            if not 1 <= ttl <= 21600:
                return 400, {}, b""
            token = uuid.uuid4().hex
            with self.lock:
                self.tokens[token] = time.monotonic() + ttl
            return 200, {"X-aws-ec2-metadata-token-ttl-seconds": str(ttl)}, token.encode()
        with self.lock:
            expiry = self.tokens.get(lower.get("x-aws-ec2-metadata-token", ""))
            if expiry is None or expiry < time.monotonic():
                return 401, {}, b""
            served = self.served.get(path)
            if served is not None:
                return served
            doc: object
            if path == "/latest/meta-data/spot/instance-action":
                doc = self.instance_action
            elif path == "/latest/meta-data/events/recommendations/rebalance":
                doc = self.rebalance
            elif path == "/latest/meta-data/events/maintenance/scheduled":
                doc = list(self.scheduled)
            elif path == "/latest/meta-data/autoscaling/target-lifecycle-state":
                state = self.target_lifecycle_state
                return (404, {}, b"Not Found") if state is None else (200, {"Content-Type": "text/plain"}, state.encode())
            else:
                item = path.removeprefix("/latest/meta-data/")
                if item in self.identity:
                    return 200, {}, self.identity[item].encode()
                return 404, {}, b""
        if doc is None:
            return 404, {}, b"Not Found"
        return 200, {"Content-Type": "text/plain"}, json.dumps(doc).encode()


#: What GCE answers ``upcoming-maintenance`` with before any notice (HTTP 503), as Google's SAP
#: agent (GoogleCloudPlatform/sapagent, shared/gce/metadataserver) expects it.
NO_UPCOMING_MAINTENANCE = b'{ "error": "no notifications have been received yet, try again later" }'
UPCOMING_MAINTENANCE = "instance/upcoming-maintenance"


class FakeGcpMetadata(FakeMetadataServer):
    """computeMetadata/v1 with ETags and hanging GETs (wait_for_change, last_etag, timeout_sec).

    ``etag_mode="counter"`` gives every change a new ETag; ``"hash"`` derives the ETag from the
    value, so a value that comes back brings its old ETag back.
    """

    def __init__(self, preemptible: bool = True, etag_mode: str = "counter", **kw: Any) -> None:
        super().__init__(**kw)
        if etag_mode not in ("counter", "hash"):
            raise ValueError(f"etag_mode {etag_mode!r}: use 'counter' or 'hash'")
        self.etag_mode = etag_mode
        self.values: dict[str, str] = {
            "instance/preempted": "FALSE",
            "instance/maintenance-event": "NONE",
            "instance/id": "4567890123456789012",
            "instance/name": "gpu-pool-abcd",
            "instance/machine-type": "projects/123/machineTypes/g2-standard-8",
            "instance/zone": "projects/123/zones/us-central1-a",
            "instance/scheduling/preemptible": "TRUE" if preemptible else "FALSE",
        }
        self.versions: Counter[str] = Counter()
        self.raised_at: float | None = None

    def etag(self, path: str) -> str:
        if self.etag_mode == "hash":
            return hashlib.sha256(self.values[path].encode()).hexdigest()[:16]
        return f"{abs(hash((path, self.versions[path]))):016x}"

    def set_upcoming_maintenance(self, doc: dict[str, object] | None) -> float:
        """A planned maintenance window (``?alt=json`` form), or None: 503 "no notifications"."""
        if doc is None:
            with self.lock:
                self.values.pop(UPCOMING_MAINTENANCE, None)
                self.raised_at = time.time()
                return self.raised_at
        return self.set_value(UPCOMING_MAINTENANCE, json.dumps(doc))

    def set_value(self, path: str, value: str) -> float:
        with self.lock:
            self.raised_at = time.time()
            self.values[path] = value
            self.versions[path] += 1
            self.lock.notify_all()
            return self.raised_at

    def raise_preempted(self) -> float:
        return self.set_value("instance/preempted", "TRUE")

    def reset(self) -> None:
        self.set_value("instance/preempted", "FALSE")
        self.raised_at = None

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        lower = {k.lower(): v for k, v in headers.items()}
        if lower.get("metadata-flavor") != "Google":
            return 403, {}, b"Missing Metadata-Flavor:Google header."
        url = urlsplit(path)
        key = url.path.removeprefix("/computeMetadata/v1/")
        query = parse_qs(url.query)
        with self.lock:
            served = self.served.get(url.path)
            if served is not None:
                return served
            if key == UPCOMING_MAINTENANCE and key not in self.values:
                return 503, {"Metadata-Flavor": "Google", "Content-Type": "application/json"}, NO_UPCOMING_MAINTENANCE
            if key not in self.values:
                return 404, {}, b""
            if query.get("wait_for_change") == ["true"]:
                last = query.get("last_etag", [None])[0]
                end = time.monotonic() + float(query.get("timeout_sec", ["60"])[0])
                while last == self.etag(key) and time.monotonic() < end:
                    self.lock.wait(end - time.monotonic())
            value, etag = self.values[key], self.etag(key)
        return 200, {"ETag": etag, "Metadata-Flavor": "Google", "Content-Type": "application/text"}, value.encode()


class FakeAzureImds(FakeMetadataServer):
    """Scheduled Events (DocumentIncarnation, StartRequests) and IMDS compute."""

    def __init__(
        self, vm_name: str = "gpupool_3", priority: str = "Spot", empty_when_idle: bool = False, **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.vm_name = vm_name
        #: Answer an idle poll with HTTP 200 and an empty body, as real AKS nodes do
        #: (captured by aks-node-termination-handler, pkg/events/events.go).
        self.empty_when_idle = empty_when_idle
        self.incarnation = 1
        self.events: list[dict[str, Any]] = []
        self.acks: Counter[str] = Counter()
        self.churn = False  # bump DocumentIncarnation on every GET
        self.duplicate = False  # list every event twice
        self.raised_at: float | None = None
        self.compute = {
            "name": vm_name,
            "vmId": "02aab8a4-74ef-476e-8182-f6d2ba4166a6",
            "vmSize": "Standard_NC4as_T4_v3",
            "zone": "2",
            "location": "eastus",
            "priority": priority,
            "evictionPolicy": "Delete" if priority == "Spot" else "",
        }

    def raise_event(
        self,
        event_type: str = "Preempt",
        resources: list[str] | None = None,
        not_before_in: float = 30.0,
        status: str = "Scheduled",
        event_id: str | None = None,
        not_before: object = None,
    ) -> str:
        """A new event; ``not_before`` overrides the RFC 1123 ``NotBefore`` (any JSON value)."""
        eid = event_id or str(uuid.uuid4()).upper()
        if not_before is None:
            not_before = (
                ""
                if status == "Started"
                else format_datetime(datetime.fromtimestamp(self.now() + not_before_in, UTC), usegmt=True)
            )
        with self.lock:
            self.raised_at = time.time()
            self.events.append(
                {
                    "EventId": eid,
                    "EventStatus": status,
                    "EventType": event_type,
                    "ResourceType": "VirtualMachine",
                    "Resources": resources if resources is not None else [self.vm_name],
                    "NotBefore": not_before,
                    "Description": "",
                    "EventSource": "Platform",
                    "DurationInSeconds": -1,
                }
            )
            self.incarnation += 1
        return eid

    def clear(self) -> None:
        with self.lock:
            self.events.clear()
            self.incarnation += 1
            self.raised_at = None

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        lower = {k.lower(): v for k, v in headers.items()}
        if lower.get("metadata") != "true":
            return 400, {}, b'{"error": "Bad request. Required metadata header not specified"}'
        url = urlsplit(path)
        if url.path == "/metadata/instance/compute":
            return 200, {"Content-Type": "application/json"}, json.dumps(self.compute).encode()
        if url.path != "/metadata/scheduledevents":
            return 404, {}, b""
        with self.lock:
            if method == "POST":
                try:
                    ids = [r["EventId"] for r in json.loads(body)["StartRequests"]]
                except (ValueError, KeyError, TypeError):
                    return 400, {}, b""
                for eid in ids:
                    self.acks[eid] += 1
                self.events = [e for e in self.events if e["EventId"] not in ids]
                self.incarnation += 1
                return 200, {}, b""
            served = self.served.get(url.path)
            if served is not None:
                return served
            if self.churn:
                self.incarnation += 1
            if self.empty_when_idle and not self.events:
                return 200, {"Content-Type": "application/json"}, b""
            events = [e for e in self.events for _ in range(2 if self.duplicate else 1)]
            doc = {"DocumentIncarnation": self.incarnation, "Events": events}
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()
