"""Fixtures every test folder may use (each folder keeps its own conftest for the rest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """moto's server (EC2, Auto Scaling, SQS, S3, FIS, ...) on a free loopback port, for one test module."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
