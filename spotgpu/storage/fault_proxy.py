"""A loopback HTTP proxy in front of an object-store emulator that misbehaves like a real store.

moto and Azurite answer every request at once and never fail. Real stores under a
checkpoint burst throttle (S3 ``503 SlowDown`` beyond a per-prefix rate, Azure ``503
ServerBusy``), and networks lose replies, reset connections and cut bodies short. This
proxy sits between obstore and the emulator and does all of that on purpose, on the wire,
so the tests and ``bench/ckpt_scale.py`` see what obstore really raises:

- **throttling**: a token bucket per *partition* (the object key up to its
  ``prefix_depth``-th ``/`` below the bucket or container, S3's "prefix"), one for writes
  (PUT/POST/DELETE) and one for reads (GET/HEAD); a request beyond it gets ``503``;
- **scripted faults** (:class:`Fault`) matched by method and a regular expression on the
  path: ``reset`` (the connection is reset before the request reaches the store),
  ``lost_reply`` (the store applies the request, then the connection is reset before the
  reply), ``truncate`` (the reply's body is cut in half, then the connection closes) and
  ``slowdown`` (a ``503`` reply).

Every request is counted (:attr:`FaultProxy.counts`), so a benchmark reads the requests a
checkpoint really sent, obstore's own retries and multipart parts included. Test and bench
tooling only: nothing in the runtime starts it.
"""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

FaultKind = Literal["reset", "lost_reply", "truncate", "slowdown"]
Dialect = Literal["s3", "azure"]

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
_WRITES = {"PUT", "POST", "DELETE"}
_BUSY_BODY = {
    "s3": b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>",
    "azure": b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
    b"<Message>The server is busy.</Message></Error>",
}


@dataclass
class Fault:
    """One scripted fault: the next ``times`` requests matching ``method`` and ``path`` get ``kind``."""

    kind: FaultKind
    method: str
    path: str
    times: int = 1
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return self.hits < self.times and method == self.method and re.search(self.path, path) is not None


class TokenBuckets:
    """Per-partition token buckets: ``rate`` requests per second each, ``burst`` at most in hand."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst = rate, burst
        self._clock = clock
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> bool:
        now = self._clock()
        with self._lock:
            tokens, last = self._state.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._state[key] = (tokens, now)
                return False
            self._state[key] = (tokens - 1.0, now)
            return True


class FaultProxy:
    """Throttling and scripted faults between a client and ``upstream`` (``http://127.0.0.1:PORT``)."""

    def __init__(
        self,
        upstream: str,
        *,
        write_rate: float | None = None,
        read_rate: float | None = None,
        burst_seconds: float = 1.0,
        prefix_depth: int = 2,
        dialect: Dialect = "s3",
    ) -> None:
        parts = urlsplit(upstream)
        if parts.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError(f"upstream: {upstream!r} is not loopback; fix: point it at the local emulator")
        self.upstream = (parts.hostname, parts.port or 80)
        self.dialect = dialect
        #: Path segments that name the container before the key: S3 path style has the bucket,
        #: Azurite the account and the container.
        self.container_segments = 1 if dialect == "s3" else 2
        self.prefix_depth = prefix_depth
        self.writes = None if write_rate is None else TokenBuckets(write_rate, max(1.0, write_rate * burst_seconds))
        self.reads = None if read_rate is None else TokenBuckets(read_rate, max(1.0, read_rate * burst_seconds))
        self.faults: list[Fault] = []
        #: (method, outcome) -> requests, outcome in ok | throttled | reset | lost_reply | truncate | slowdown.
        self.counts: Counter[tuple[str, str]] = Counter()
        #: partition -> requests that reached it (throttled or not).
        self.partitions: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- control --------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None, "start() the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        handler = type("Handler", (_Handler,), {"proxy": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="spotgpu-fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, kind: FaultKind, method: str, path: str, times: int = 1) -> Fault:
        fault = Fault(kind, method.upper(), path, times)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.counts.clear()
            self.partitions.clear()

    def total(self, outcome: str | None = None) -> int:
        with self._lock:
            return sum(n for (_m, o), n in self.counts.items() if outcome is None or o == outcome)

    # ---- decisions (called by the handler threads) -----------------------------
    def partition(self, target: str) -> str:
        """The key prefix S3 would partition on: container segments plus ``prefix_depth`` key segments.
        A LIST request partitions on its ``prefix=`` parameter."""
        split = urlsplit(target)
        segments = [s for s in unquote(split.path).split("/") if s]
        key = segments[self.container_segments :]
        if not key:
            query = parse_qs(split.query)
            listed = (query.get("prefix") or [""])[0]
            key = [s for s in listed.split("/") if s]
        return "/".join(key[: self.prefix_depth])

    def decide(self, method: str, target: str) -> str:
        """``ok``, ``throttled`` or a fault kind, for one request; counted."""
        part = self.partition(target)
        path = unquote(urlsplit(target).path)
        with self._lock:
            self.partitions[part] += 1
            fault = next((f for f in self.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.hits += 1
        outcome: str = fault.kind if fault is not None else "ok"
        if outcome == "ok":
            buckets = self.writes if method in _WRITES else self.reads
            if buckets is not None and not buckets.take(part):
                outcome = "throttled"
        with self._lock:
            self.counts[(method, outcome)] += 1
        return outcome


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        return

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reset(self) -> None:
        """Abort the client's connection with a TCP RST (what a middlebox or a crashed peer does)."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _busy(self) -> None:
        body = _BUSY_BODY[self.proxy.dialect]
        self.send_response(503, "Slow Down" if self.proxy.dialect == "s3" else "Server Busy")
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(body)

    def _forward(self, body: bytes) -> http.client.HTTPResponse:
        for attempt in range(2):
            if self._upstream is None:
                self._upstream = http.client.HTTPConnection(*self.proxy.upstream, timeout=120)
            try:
                self._upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self._upstream.putheader(name, value)
                if body or self.command in _WRITES:
                    self._upstream.putheader("Content-Length", str(len(body)))
                self._upstream.endheaders(body or None)
                return self._upstream.getresponse()
            except (http.client.HTTPException, OSError):
                self._upstream.close()
                self._upstream = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _handle(self) -> None:
        body = self._body()
        outcome = self.proxy.decide(self.command, self.path)
        if outcome == "reset":
            self._reset()
            return
        if outcome in ("throttled", "slowdown"):
            self._busy()
            return
        resp = self._forward(body)
        data = resp.read()
        if resp.getheader("Connection", "").lower() == "close" and self._upstream is not None:
            self._upstream.close()
            self._upstream = None
        if outcome == "lost_reply":  # applied upstream; the client never hears
            self._reset()
            return
        self.send_response(resp.status, resp.reason)
        for name, value in resp.getheaders():
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data) if self.command != "HEAD" else resp.getheader("Content-Length") or 0))
        self.end_headers()
        if self.command == "HEAD":
            return
        if outcome == "truncate":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self._reset()
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle
