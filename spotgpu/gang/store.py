"""``spotgpu gang store --port P``: the rendezvous store, hosted off the preemptible VMs.

torchrun's ``c10d`` rendezvous backend keeps the gang's membership in a
``torch.distributed.TCPStore``. By default the first node to start hosts it, so
preempting that node takes the rendezvous down with it. Run this instead on a small
on-demand host (the components create one per gang pool) and start every node's
torchrun with ``--rdzv-conf is_host=false``: every node is then only a client, and a
notice on any of them leaves the store, and so the gang's next round, intact.

The store is torch's own (``multi_tenant=True``: several gangs' run ids may share it;
libuv server). It holds a few small keys per gang; it is not on the training path.
"""

from __future__ import annotations

import argparse
import datetime
import signal
import sys
import threading
from typing import Any

from spotgpu.cliutil import whole
from spotgpu.models.gang import DEFAULT_STORE_PORT


def serve_store(host: str = "0.0.0.0", port: int = DEFAULT_STORE_PORT) -> Any:
    """Start a TCPStore server on ``host:port`` (port 0: any free port, read ``.port``)."""
    from torch.distributed import TCPStore

    return TCPStore(
        host,
        port,
        is_master=True,
        wait_for_workers=False,
        multi_tenant=True,
        timeout=datetime.timedelta(seconds=60),
    )


def connect_store(host: str, port: int, timeout_seconds: float = 30.0) -> Any:
    """A client of the rendezvous store (what the launcher uses for its own few keys)."""
    from torch.distributed import TCPStore

    return TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout_seconds))


def cmd_store(args: argparse.Namespace) -> int:
    store = serve_store(args.host, args.port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"spotgpu gang store: serving a TCPStore on {args.host}:{store.port}", file=sys.stderr, flush=True)
    stop.wait()
    return 0


def register_store(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("store", help="serve the gang's rendezvous TCPStore (on a small on-demand host)")
    p.add_argument("--host", default="0.0.0.0", help="bind address (default: all interfaces)")
    p.add_argument(
        "--port", type=whole(0, 65535), default=DEFAULT_STORE_PORT, help=f"TCP port (default {DEFAULT_STORE_PORT}; 0: any)"
    )
    p.set_defaults(func=cmd_store)
