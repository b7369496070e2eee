"""AWS: IMDSv2 client, the spot instance-action and rebalance monitors, identity.

Pools set ``http_tokens=required``, so every read carries a session token from
``PUT /latest/api/token``. The token is refreshed shortly before it expires and
again whenever IMDS answers 401 (expired, or IMDS forgot it), so a token problem
costs one extra round trip, never a missed notice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from spotgpu.agent.events import InterruptionEvent, NoticeWithdrawn
from spotgpu.agent.http import MetadataError, MetadataHttp, Response
from spotgpu.agent.identity import VmIdentity
from spotgpu.agent.timeparse import iso8601
from spotgpu.contract.interruptions import InterruptionKind

DEFAULT_BASE_URL = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
INSTANCE_ACTION_PATH = "/latest/meta-data/spot/instance-action"
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
#: AWS issues the instance-action notice two minutes before the action.
SPOT_NOTICE_SECONDS = 120.0

log = logging.getLogger(__name__)
#: The fastest poll the agent allows. AWS throttles IMDS per instance without publishing a
#: rate (link-local traffic shares a 1024 packets/s cap per interface) and recommends a 5 s
#: poll; two sources at 0.2 s are 10 requests/s, far below the cap, and 1 s is the default.
MIN_POLL_INTERVAL_SECONDS = 0.2


class ImdsV2Client:
    """Thread-safe IMDSv2 reads with one shared, self-refreshing token."""

    def __init__(
        self,
        http: MetadataHttp,
        token_ttl_seconds: int = 21600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= token_ttl_seconds <= 21600:
            raise ValueError(f"token_ttl_seconds {token_ttl_seconds} must be 1..21600 (IMDSv2 limit)")
        self.http = http
        self.ttl = token_ttl_seconds
        self.clock = clock
        self._token: str | None = None
        self._expires = 0.0
        self._lock = threading.Lock()
        self.token_fetches = 0

    def _refresh_margin(self) -> float:
        return min(60.0, self.ttl / 4)

    def _fresh_token(self, force: bool = False) -> str:
        with self._lock:
            if not force and self._token and self.clock() < self._expires - self._refresh_margin():
                return self._token
            started = self.clock()
            resp = self.http.request("PUT", TOKEN_PATH, headers={TOKEN_TTL_HEADER: str(self.ttl)})
            if resp.status != 200 or not resp.body:
                raise MetadataError("token", f"IMDSv2 token request answered HTTP {resp.status}")
            self._token = resp.text()
            self._expires = started + self.ttl
            self.token_fetches += 1
            return self._token

    def get(self, path: str, timeout: float | None = None) -> Response:
        """GET with the token; one retry with a new token on 401. ``timeout``: a poll's own deadline."""
        resp = self.http.request("GET", path, headers={TOKEN_HEADER: self._fresh_token()}, timeout=timeout)
        if resp.status == 401:
            resp = self.http.request(
                "GET", path, headers={TOKEN_HEADER: self._fresh_token(force=True)}, timeout=timeout
            )
        return resp

    def get_text(self, path: str) -> str:
        resp = self.get(path)
        if resp.status != 200:
            raise MetadataError(f"http_{resp.status}", f"GET {path} answered HTTP {resp.status}")
        return resp.text()


def _json_object(resp: Response, path: str) -> dict[str, object]:
    if resp.status != 200:
        raise MetadataError(f"http_{resp.status}", f"GET {path} answered HTTP {resp.status}")
    doc = resp.json()
    if not isinstance(doc, dict):
        raise MetadataError("malformed", f"GET {path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _time_or_none(value: object, field: str) -> tuple[float | None, str | None]:
    """(time, None), or (None, the value as served) when it cannot be read: the notice still counts."""
    try:
        return iso8601(value, field), None
    except MetadataError as err:
        log.warning("%s; acting on the notice at once with the contract's notice", err)
        return None, repr(value)


class SpotInterruptionMonitor:
    """``spot/instance-action``: 404 until AWS marks the instance for stop/hibernate/terminate."""

    source = "aws/spot-instance-action"

    def __init__(self, imds: ImdsV2Client, interval: float = 1.0, read_timeout: float | None = None) -> None:
        self.imds = imds
        self.interval = interval
        self.read_timeout = read_timeout  # None: the client's request timeout
        self.last_clean: float | None = None

    def check(self) -> list[InterruptionEvent]:
        resp = self.imds.get(INSTANCE_ACTION_PATH, self.read_timeout)
        if resp.status == 404:
            return []
        doc = _json_object(resp, INSTANCE_ACTION_PATH)
        action, when = doc.get("action"), doc.get("time")
        if action not in ("terminate", "stop", "hibernate"):
            raise MetadataError("malformed", f"instance-action: unknown action {action!r}")
        deadline, unparsed = _time_or_none(when, "instance-action.time")
        now = time.time()
        return [
            InterruptionEvent(
                event_id=f"{action}@{when}",
                kind=InterruptionKind.PREEMPT,
                source=self.source,
                detected_at=now,
                raw=doc,
                cloud_deadline=deadline,
                # Hibernation starts at once, so there is no two-minute window to subtract.
                published_at=None if action == "hibernate" or deadline is None else deadline - SPOT_NOTICE_SECONDS,
                since_last_clean_poll=None if self.last_clean is None else now - self.last_clean,
                unparsed_time=unparsed,
            )
        ]


class RebalanceMonitor:
    """``events/recommendations/rebalance``: 404 until an elevated-risk signal (best effort)."""

    source = "aws/rebalance-recommendation"

    def __init__(self, imds: ImdsV2Client, interval: float = 1.0, read_timeout: float | None = None) -> None:
        self.imds = imds
        self.interval = interval
        self.read_timeout = read_timeout
        self.last_clean: float | None = None
        #: The recommendation last seen; a 404 after it means AWS withdrew it.
        self.active: str | None = None

    def check(self) -> list[InterruptionEvent | NoticeWithdrawn]:
        resp = self.imds.get(REBALANCE_PATH, self.read_timeout)
        if resp.status == 404:
            gone, self.active = self.active, None
            return [NoticeWithdrawn(self.source, (gone,), time.time())] if gone else []
        doc = _json_object(resp, REBALANCE_PATH)
        published, unparsed = _time_or_none(doc.get("noticeTime"), "rebalance.noticeTime")
        now = time.time()
        self.active = f"rebalance@{doc.get('noticeTime')}"
        return [
            InterruptionEvent(
                event_id=f"rebalance@{doc.get('noticeTime')}",
                kind=InterruptionKind.REBALANCE,
                source=self.source,
                detected_at=now,
                raw=doc,
                published_at=published,
                since_last_clean_poll=None if self.last_clean is None else now - self.last_clean,
                unparsed_time=unparsed,
            )
        ]


def fetch_identity(imds: ImdsV2Client) -> VmIdentity:
    """instance-id, instance-type, placement and ``instance-life-cycle`` (spot | on-demand)."""

    def item(path: str) -> str:
        return imds.get_text(f"/latest/meta-data/{path}")

    life_cycle = item("instance-life-cycle")
    return VmIdentity(
        provider="aws",
        instance_id=item("instance-id"),
        instance_type=item("instance-type"),
        zone=item("placement/availability-zone"),
        region=item("placement/region"),
        capacity="spot" if life_cycle == "spot" else "on-demand",
    )


class AutoscalingClient(Protocol):
    """The one boto3 ``autoscaling`` call the agent makes."""

    def complete_lifecycle_action(self, **kwargs: Any) -> Any: ...


class LifecycleHookAcknowledger:
    """Completes the ASG termination lifecycle hook (CONTINUE) once the drain is done.

    The boto3 client is injected (tests pass a fake or a moto client); by default
    one is built for the VM's region. A Spot reclaim proceeds about two minutes
    after the notice whatever the hook does; completing it early lets the ASG
    launch the replacement sooner.
    """

    def __init__(
        self,
        autoscaling_group: str,
        hook_name: str,
        instance_id: Callable[[], str],
        client_factory: Callable[[], AutoscalingClient],
    ) -> None:
        self.autoscaling_group = autoscaling_group
        self.hook_name = hook_name
        self.instance_id = instance_id
        self.client_factory = client_factory
        self._client: AutoscalingClient | None = None
        self.completed: list[str] = []

    def acknowledge(self, event: InterruptionEvent) -> None:
        if self.completed:
            return  # the hook is per instance: complete it once
        if self._client is None:
            self._client = self.client_factory()
        self._client.complete_lifecycle_action(
            AutoScalingGroupName=self.autoscaling_group,
            LifecycleHookName=self.hook_name,
            LifecycleActionResult="CONTINUE",
            InstanceId=self.instance_id(),
        )
        self.completed.append(event.event_id)


def boto3_autoscaling_factory(region: Callable[[], str]) -> Callable[[], AutoscalingClient]:
    def make() -> AutoscalingClient:
        import boto3  # the aws extra; only needed when a lifecycle hook is configured

        client: AutoscalingClient = boto3.client("autoscaling", region_name=region() or None)
        return client

    return make
