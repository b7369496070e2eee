"""The local control endpoint a workload talks to: HTTP on a Unix socket or loopback.

Routes (JSON in and out):

* ``GET  /v1/notice[?since=V&wait=S]``  current notice; with ``wait`` it long-polls
  until the state version exceeds ``since`` (how the client learns of a notice
  within milliseconds of the agent).
* ``POST /v1/register {"pgid": N}``    this process group gets the notice signal.
* ``POST /v1/ready``                    the workload is ready (boot-to-ready, stage=workload).
* ``POST /v1/report {...}``             a checkpoint outcome, the body of a
  :class:`~spotgpu.contract.checkpoint_report.CheckpointReport` (``checkpoint``: early|final; a gang's
  ``gang`` with ``role`` noticed|peer, recorded and never drained; ``restore``: the resumed step, its
  ``source`` local|peer|store, ``seconds``, ``bytes``; ``step``: the first step after a restore).
* ``POST /v1/throughput {"stepSeconds", "steps", "gpuModel"}``  the mean step time of the last
  ``steps`` steps (and the GPU model, when the workload knows it), the body of a
  :class:`~spotgpu.contract.throughput.ThroughputReport`: logged, never a checkpoint.
* ``GET  /v1/status``                   everything, for ``spotgpu agent status``.
* ``GET  /healthz``                     liveness.

Only the workload's own routes (``/v1/notice``, register, ready, report, throughput) count as
contact: a status read or a health probe is an operator or a monitor, and must not
make the agent wait out a final-checkpoint budget for a workload that does not exist.
"""

from __future__ import annotations

import json
import logging
import os
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from spotgpu.agent.state import WorkloadState
from spotgpu.contract.checkpoint_report import CheckpointReport
from spotgpu.contract.throughput import ThroughputReport

MAX_WAIT_SECONDS = 300.0
#: How soon an open long poll sees that the server stopped.
STOP_CHECK_SECONDS = 0.25
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: A client that goes away mid-reply (a long poll whose workload exited, a killed rank) is normal.
CLIENT_LEFT = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

log = logging.getLogger(__name__)


def parse_address(address: str) -> tuple[str, str | tuple[str, int]]:
    """``/run/x.sock`` or ``unix:/run/x.sock`` -> unix; ``127.0.0.1:9465`` or ``http://127.0.0.1:9465`` -> tcp."""
    if address.startswith("unix:"):
        return "unix", address[5:]
    if address.startswith("/"):
        return "unix", address
    hostport = urlsplit(address if "//" in address else f"//{address}")
    try:
        port = hostport.port
    except ValueError:  # urllib: "Port out of range 0-65535" or not a number
        port = -1
    if not hostport.hostname or port is None:
        raise ValueError(
            f"control address {address!r} is neither a socket path nor HOST:PORT; "
            "fix: use /path/to.sock or 127.0.0.1:PORT"
        )
    if not 0 <= port <= 65535:
        raise ValueError(
            f"control address {address!r} has no valid port; fix: use 127.0.0.1:PORT with PORT 1 to 65535 "
            "(0 picks a free port), or a Unix socket path"
        )
    if hostport.hostname not in LOOPBACK:
        raise ValueError(f"control address {address!r} is not loopback; fix: use 127.0.0.1:PORT or a Unix socket")
    return "tcp", (hostport.hostname, port)


class _Handler(BaseHTTPRequestHandler):
    server: Any  # _UnixServer | _TcpServer, both carrying .control
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def address_string(self) -> str:
        return "local"

    def _send(self, status: int, payload: object) -> None:
        body = json.dumps(payload, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        data = json.loads(self.rfile.read(length))
        if not isinstance(data, dict):
            raise ValueError("body must be a JSON object")
        return data

    def do_GET(self) -> None:
        control: ControlServer = self.server.control
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/v1/notice":
            control.state.touch()  # the workload's own route (the client's should_stop/long poll)
            if "wait" in query:
                since = int(query.get("since", ["-1"])[0])
                control.long_poll(since, min(float(query["wait"][0]), MAX_WAIT_SECONDS))
            self._send(200, control.state.snapshot())
        elif url.path == "/v1/status":
            self._send(200, control.status())
        elif url.path == "/healthz":
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": f"no route {url.path}"})

    def do_POST(self) -> None:
        control: ControlServer = self.server.control
        try:
            body = self._body()
            if self.path == "/v1/register":
                control.state.register(int(body.get("pgid") or os.getpgid(int(body["pid"]))))
            elif self.path == "/v1/ready":
                control.on_ready()
            elif self.path == "/v1/report":
                control.state.add_report(CheckpointReport.from_json(body))
            elif self.path == "/v1/throughput":
                sample = ThroughputReport.from_json(body)
                control.state.touch()
                control.on_throughput(sample)
            else:
                self._send(404, {"error": f"no route {self.path}"})
                return
        except (ValueError, KeyError, TypeError, ProcessLookupError) as err:
            self._send(400, {"error": str(err)})
            return
        self._send(200, control.state.snapshot())


class _QuietAboutLeavers:
    """socketserver prints a traceback to stderr for any error in a handler; a client that hung
    up is not an error (one debug line), anything else is logged once with its traceback."""

    def handle_error(self, request: object, client_address: object) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, CLIENT_LEFT):
            log.debug("control client left before its reply: %s", err)
        else:
            log.exception("control request failed")


class _UnixServer(_QuietAboutLeavers, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    control: ControlServer


class _TcpServer(_QuietAboutLeavers, ThreadingHTTPServer):
    daemon_threads = True
    control: ControlServer


class ControlServer:
    def __init__(
        self,
        address: str,
        state: WorkloadState,
        status: Callable[[], dict[str, object]] | None = None,
        on_ready: Callable[[], None] | None = None,
        on_throughput: Callable[[ThroughputReport], None] | None = None,
    ) -> None:
        self.address = address
        self.state = state
        self._status = status or state.snapshot
        self._on_ready = on_ready or state.mark_ready
        self._on_throughput = on_throughput or (lambda sample: None)
        kind, where = parse_address(address)
        self.server: _UnixServer | _TcpServer
        if kind == "unix":
            assert isinstance(where, str)
            os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
            if os.path.exists(where):
                os.unlink(where)  # a stale socket from a previous run
            self.server = _UnixServer(where, _Handler)
            # Any local user's workload may connect: the GPU VM is single-tenant.
            os.chmod(where, 0o666)
        else:
            assert isinstance(where, tuple)
            self.server = _TcpServer(where, _Handler)
        self.server.control = self
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), name="control", daemon=True)

    @property
    def url(self) -> str:
        """An address a client accepts (with the real port when 0 was asked for)."""
        if isinstance(self.server, _TcpServer):
            host, port = self.server.server_address[:2]
            return f"{host!s}:{port}"
        return self.address

    def status(self) -> dict[str, object]:
        return self._status()

    def on_ready(self) -> None:
        self._on_ready()

    def on_throughput(self, sample: ThroughputReport) -> None:
        self._on_throughput(sample)

    def long_poll(self, since: int, wait: float) -> None:
        """Until the state's version passes ``since``, ``wait`` s pass, or the server stops: a stopped
        server must not leave a handler thread waiting minutes to answer a client that is gone."""
        end = time.monotonic() + wait
        while not self._closing.is_set() and self.state.version <= since:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            self.state.wait_change(since, min(remaining, STOP_CHECK_SECONDS))

    def start(self) -> ControlServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()
        kind, where = parse_address(self.address)
        if kind == "unix" and isinstance(where, str) and os.path.exists(where):
            os.unlink(where)
