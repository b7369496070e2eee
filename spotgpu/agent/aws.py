"""AWS: IMDSv2 client, one monitor per IMDS notice source, identity, the lifecycle hook.

The sources (as aws-node-termination-handler watches them):

* ``spot/instance-action``: the two-minute Spot interruption notice (**preempt**);
* ``events/recommendations/rebalance``: the earlier, unguaranteed rebalance recommendation;
* ``events/maintenance/scheduled``: EC2 scheduled events (instance-retirement and
  instance-stop end the VM: **terminate**; system-reboot, instance-reboot and
  system-maintenance: **maintenance**), due at their ``NotBefore``;
* ``autoscaling/target-lifecycle-state``: ``Terminated`` once the Auto Scaling group scales
  the instance in (the controller's own ladder does): **terminate**, due when the lifecycle
  hook's heartbeat runs out.

Pools set ``http_tokens=required``, so every read carries a session token from
``PUT /latest/api/token``. The token is refreshed shortly before it expires and
again whenever IMDS answers 401 (expired, or IMDS forgot it), so a token problem
costs one extra round trip, never a missed notice.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from spotgpu.agent.events import InterruptionEvent, NoticeWithdrawn, since, withdrawn
from spotgpu.agent.http import MetadataError, MetadataHttp, Response
from spotgpu.agent.identity import VmIdentity
from spotgpu.agent.response_rules import TERMINAL_HORIZON_SECONDS
from spotgpu.agent.timeparse import required_time
from spotgpu.agent.transitions import Transitions
from spotgpu.contract.interruptions import InterruptionKind

DEFAULT_BASE_URL = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
INSTANCE_ACTION_PATH = "/latest/meta-data/spot/instance-action"
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
SCHEDULED_EVENTS_PATH = "/latest/meta-data/events/maintenance/scheduled"
TARGET_LIFECYCLE_STATE_PATH = "/latest/meta-data/autoscaling/target-lifecycle-state"
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
        return required_time(value, field), None
    except MetadataError as err:
        log.warning("%s; acting on the notice at once with the contract's notice", err)
        return None, repr(value)


#: ``spot/instance-action`` actions: all three end the VM's work.
SPOT_ACTIONS = ("terminate", "stop", "hibernate")


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
        # The item exists only once the instance is marked for interruption: an action this
        # agent does not know is still an interruption (the safest reading), never an error loop.
        unknown = None if action in SPOT_ACTIONS else str(action)
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
                since_last_clean_poll=since(self.last_clean, now),
                unparsed_time=unparsed,
                unknown_value=unknown,
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
            return withdrawn(self.source, gone, time.time())
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
                since_last_clean_poll=since(self.last_clean, now),
                unparsed_time=unparsed,
            )
        ]


#: EC2 scheduled event codes (EC2 User Guide, "Scheduled events for your instances") and what
#: each means for the VM. A code not listed is read as the most disruptive: the VM ends.
SCHEDULED_EVENT_KINDS = {
    "instance-retirement": InterruptionKind.TERMINATE,
    "instance-stop": InterruptionKind.TERMINATE,
    "instance-reboot": InterruptionKind.MAINTENANCE,
    "system-reboot": InterruptionKind.MAINTENANCE,
    "system-maintenance": InterruptionKind.MAINTENANCE,
}
#: States an event leaves the list in (it no longer applies).
SCHEDULED_EVENT_DONE = ("completed", "canceled")
#: The suffix of a terminal scheduled event's early phase (see :class:`ScheduledEventsMonitor`).
AHEAD = "/ahead"


class ScheduledEventsMonitor:
    """``events/maintenance/scheduled``: a JSON list of EC2 scheduled events (``[]`` or 404: none).

    Each event's identity is its ``EventId`` and its deadline its ``NotBefore`` (announced days
    or weeks ahead, so no lead is implausible). A terminal event (retirement, stop) further out
    than :data:`~spotgpu.agent.response_rules.TERMINAL_HORIZON_SECONDS` is first an early **maintenance**
    notice (``<EventId>/ahead``: checkpoint early, keep working) and becomes **terminate** (final
    checkpoint, drain) once that close; a ``completed`` or ``canceled`` event is withdrawn.
    """

    source = "aws/scheduled-events"

    def __init__(self, imds: ImdsV2Client, interval: float = 1.0, read_timeout: float | None = None) -> None:
        self.imds = imds
        self.interval = interval
        self.read_timeout = read_timeout
        self.last_clean: float | None = None
        self.active: set[str] = set()

    def check(self) -> list[InterruptionEvent | NoticeWithdrawn]:
        resp = self.imds.get(SCHEDULED_EVENTS_PATH, self.read_timeout)
        now = time.time()
        entries: list[object] = []
        if resp.status != 404 and resp.body.strip():
            if resp.status != 200:
                raise MetadataError(f"http_{resp.status}", f"GET {SCHEDULED_EVENTS_PATH} answered HTTP {resp.status}")
            doc = resp.json()
            if not isinstance(doc, list):
                raise MetadataError("malformed", f"GET {SCHEDULED_EVENTS_PATH}: expected a JSON list")
            entries = doc
        found = [ev for ev in (self._event(raw, now) for raw in entries) if ev is not None]
        present = {ev.event_id for ev in found}
        gone, self.active = tuple(sorted(self.active - present)), present
        return [*found, *withdrawn(self.source, gone, now)]

    def _event(self, raw: object, now: float) -> InterruptionEvent | None:
        if not isinstance(raw, dict) or str(raw.get("State", "active")).lower() in SCHEDULED_EVENT_DONE:
            return None
        code = str(raw.get("Code", ""))
        kind = SCHEDULED_EVENT_KINDS.get(code, InterruptionKind.TERMINATE)
        event_id = str(raw.get("EventId") or f"{code}@{raw.get('NotBefore')}")
        not_before, unparsed = _time_or_none(raw.get("NotBefore"), "scheduled-event.NotBefore")
        if kind.terminal and not_before is not None and not_before - now > TERMINAL_HORIZON_SECONDS:
            kind, event_id = InterruptionKind.MAINTENANCE, event_id + AHEAD
        return InterruptionEvent(
            event_id=event_id,
            kind=kind,
            source=self.source,
            detected_at=now,
            raw=raw,
            cloud_deadline=not_before,
            since_last_clean_poll=since(self.last_clean, now),
            unparsed_time=unparsed,
            max_lead=math.inf,
            unknown_value=None if code in SCHEDULED_EVENT_KINDS else code,
        )


#: Auto Scaling target lifecycle states that leave the VM running (EC2 Auto Scaling User Guide,
#: "Retrieve the target lifecycle state through instance metadata"). ``Terminated`` ends it;
#: a state not listed is read as the most disruptive.
TARGET_STATES_KEPT = ("InService", "Pending", "Standby", "Detached", "Warmed:Stopped", "Warmed:Running", "Warmed:Hibernated")
TARGET_TERMINATED = "Terminated"
#: The lifecycle hook's heartbeat when the config does not say (the API's default).
DEFAULT_HEARTBEAT_SECONDS = 3600


class TargetLifecycleMonitor:
    """``autoscaling/target-lifecycle-state``: ``Terminated`` once the group scales this VM in.

    The text is a state with no time and no id (404 or empty: not in a group, or not populated
    yet). ``Terminated`` is **terminate**; the group waits for the lifecycle hook up to its
    heartbeat timeout, so that is the deadline (with no hook the instance goes at once). The
    identity is the value's transition, so a VM put back in service and scaled in again is
    noticed again.
    """

    source = "aws/target-lifecycle-state"

    def __init__(
        self,
        imds: ImdsV2Client,
        interval: float = 1.0,
        read_timeout: float | None = None,
        heartbeat_seconds: float | None = DEFAULT_HEARTBEAT_SECONDS,
    ) -> None:
        self.imds = imds
        self.interval = interval
        self.read_timeout = read_timeout
        #: None: no lifecycle hook, the instance terminates as soon as the group decides.
        self.heartbeat_seconds = heartbeat_seconds
        self.last_clean: float | None = None
        self.transitions = Transitions()
        self.active: str | None = None

    def check(self) -> list[InterruptionEvent | NoticeWithdrawn]:
        resp = self.imds.get(TARGET_LIFECYCLE_STATE_PATH, self.read_timeout)
        if resp.status not in (200, 404):
            raise MetadataError(f"http_{resp.status}", f"GET {TARGET_LIFECYCLE_STATE_PATH} answered HTTP {resp.status}")
        state = resp.text() if resp.status == 200 else ""
        now = time.time()
        seq = self.transitions.observe(state)
        if not state or state in TARGET_STATES_KEPT:
            gone, self.active = self.active, None
            return withdrawn(self.source, gone, now)
        event = InterruptionEvent(
            event_id=f"{state}#{seq}",
            kind=InterruptionKind.TERMINATE,
            source=self.source,
            detected_at=now,
            raw=state,
            since_last_clean_poll=since(self.last_clean, now),
            documented_lead=0.0 if self.heartbeat_seconds is None else float(self.heartbeat_seconds),
            unknown_value=None if state == TARGET_TERMINATED else state,
        )
        self.active = event.event_id
        return [event]


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
    launch the replacement sooner. Only the notices the group waits on are answered
    (the Spot notice, after which the group starts its hook, and the target lifecycle
    state): a scheduled retirement has no lifecycle action to complete.
    """

    #: The monitors whose terminal notices put the instance in ``Terminating:Wait``.
    SOURCES = (SpotInterruptionMonitor.source, TargetLifecycleMonitor.source)

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

    def handles(self, event: InterruptionEvent) -> bool:
        return event.source in self.SOURCES

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
