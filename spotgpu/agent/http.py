"""A tiny HTTP client for instance metadata services.

Metadata services are plain HTTP on a link-local address; a full HTTP library
buys nothing and would be one more dependency on every GPU VM. The base URL is
injectable (aws-node-termination-handler's ``ec2metadata.New(url, ...)``) so
tests and benchmarks point it at a loopback fake.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from urllib.parse import urlsplit


class MetadataError(Exception):
    """A metadata request failed (network, timeout, 5xx, unparseable body).

    Monitors catch it, count it and retry: a flaky metadata service must never
    stop the agent from seeing the next, valid notice.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace").strip()

    def json(self) -> object:
        try:
            return json.loads(self.body)
        except ValueError as err:
            raise MetadataError("malformed", f"malformed JSON from metadata service: {err}") from err


def check_base_url(base_url: str) -> tuple[str, int, str]:
    """``http://HOST[:PORT][/PREFIX]`` -> (host, port, prefix); metadata services are plain HTTP."""
    parts = urlsplit(base_url)
    try:
        port = parts.port or 80
    except ValueError:
        port = -1
    if parts.scheme != "http" or not parts.hostname or not 1 <= port <= 65535:
        raise ValueError(
            f"metadata URL {base_url!r} is not plain HTTP to a host; fix: use http://HOST[:PORT] "
            "(or omit it for the provider's link-local endpoint)"
        )
    return parts.hostname, port, parts.path.rstrip("/")


class MetadataHttp:
    """Requests against one base URL, each with its own timeout."""

    def __init__(self, base_url: str, timeout: float = 2.0) -> None:
        self.host, self.port, self.prefix = check_base_url(base_url)
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        timeout: float | None = None,
    ) -> Response:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            conn.request(method, self.prefix + path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        except TimeoutError as err:
            raise MetadataError("timeout", f"{method} {path}: timed out") from err
        except (OSError, http.client.HTTPException) as err:
            raise MetadataError("network", f"{method} {path}: {err}") from err
        finally:
            conn.close()
