"""Wires an :class:`AgentConfig` into a running agent.

Monitors (one thread per source) -> queue -> responder (in order, de-duplicated)
-> workload state (control endpoint, signals, hooks) and acknowledgers. The
cloud-specific parts are chosen here and nowhere else.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spotgpu.agent import actions, aws, azure, gcp
from spotgpu.agent.config import AgentConfig
from spotgpu.agent.control import ControlServer
from spotgpu.agent.controller_link import DRAIN_SOURCE, ControllerLink, DrainMonitor, boot_time
from spotgpu.agent.events import InterruptionEvent, NoticeWithdrawn
from spotgpu.agent.http import MetadataError, MetadataHttp
from spotgpu.agent.identity import VmIdentity, unknown_identity
from spotgpu.agent.monitor import Monitor, MonitorRunner
from spotgpu.agent.responder import Acknowledger, Responder, WorkloadHooks
from spotgpu.agent.response_rules import contract_from_config
from spotgpu.agent.state import WorkloadState
from spotgpu.agent.telemetry import AgentTelemetry, seconds_since_boot
from spotgpu.agent.transitions import Transitions
from spotgpu.contract.agent_records import Started
from spotgpu.contract.agent_status import AgentStatus, ControllerLinkStatus, SeenEvent
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.throughput import ThroughputReport

log = logging.getLogger(__name__)

DEFAULT_URLS = {"aws": aws.DEFAULT_BASE_URL, "gcp": gcp.DEFAULT_BASE_URL, "azure": azure.DEFAULT_BASE_URL}


@dataclass
class CloudWiring:
    """What a provider contributes: its monitors, identity lookup and acknowledgers."""

    monitors: list[Monitor]
    identity: Callable[[], VmIdentity]
    acknowledgers: list[Acknowledger] = field(default_factory=list)


def wire_cloud(
    config: AgentConfig, autoscaling_client: Callable[[], aws.AutoscalingClient] | None = None
) -> CloudWiring:
    rt = config.effective_runtime()
    every = rt.plain_read_seconds if config.provider == "gcp" else rt.poll_interval_seconds
    # Polls get a short deadline of their own; the token, identity and acknowledgements keep
    # the full request timeout (a slow approval must not be given up early).
    read = poll_timeout(rt.request_timeout_seconds, every)
    http = MetadataHttp(rt.metadata_url or DEFAULT_URLS[config.provider], timeout=rt.request_timeout_seconds)
    if config.provider == "aws":
        imds = aws.ImdsV2Client(http, token_ttl_seconds=rt.imds_token_ttl_seconds)
        cached: dict[str, VmIdentity] = {}

        def identity() -> VmIdentity:
            if "id" not in cached:
                cached["id"] = aws.fetch_identity(imds)
            return cached["id"]

        acks: list[Acknowledger] = []
        if config.lifecycle_hook:
            if not config.autoscaling_group:
                raise ValueError(
                    "lifecycleHook is set but autoscalingGroup is not; fix: set autoscalingGroup to the pool's ASG"
                )
            factory = autoscaling_client or aws.boto3_autoscaling_factory(lambda: identity().region)
            acks.append(
                aws.LifecycleHookAcknowledger(
                    config.autoscaling_group, config.lifecycle_hook, lambda: identity().instance_id, factory
                )
            )
        interval = rt.poll_interval_seconds
        # With a hook the group waits up to its heartbeat for the drain; without, it terminates at once.
        heartbeat = (config.lifecycle_hook_heartbeat_seconds or aws.DEFAULT_HEARTBEAT_SECONDS) if config.lifecycle_hook else None
        monitors: list[Monitor] = [
            aws.SpotInterruptionMonitor(imds, interval, read),
            aws.RebalanceMonitor(imds, interval, read),
            aws.ScheduledEventsMonitor(imds, interval, read),
            aws.TargetLifecycleMonitor(imds, interval, read, heartbeat_seconds=heartbeat),
        ]
        return CloudWiring(monitors, identity, acks)
    if config.provider == "gcp":
        client = gcp.GcpMetadataClient(http)
        timeout = rt.hanging_get_timeout_seconds
        preempted, maintenance = Transitions(), Transitions()  # one per value, shared by its two readers
        return CloudWiring(
            [
                gcp.PreemptedMonitor(client, timeout, transitions=preempted),
                gcp.MaintenanceMonitor(client, timeout, transitions=maintenance),
                # The stall guards: a stalled hanging GET hides a notice for at most `every` s.
                gcp.PreemptedMonitor.plain_reads(client, every, read, preempted),
                gcp.MaintenanceMonitor.plain_reads(client, every, read, maintenance),
                gcp.UpcomingMaintenanceMonitor(client, every, read),
            ],
            lambda: gcp.fetch_identity(client),
        )
    az = azure.AzureImdsClient(http)
    return CloudWiring(
        [azure.ScheduledEventsMonitor(az, rt.vm_name, rt.poll_interval_seconds, read)],
        lambda: azure.fetch_identity(az),
        [azure.StartRequestAcknowledger(az)],
    )


#: The shortest read deadline a poll gets (link-local metadata answers in milliseconds).
MIN_POLL_TIMEOUT_SECONDS = 0.25
#: How long Agent.stop waits for its threads to end (a metadata poll in flight ends within its timeout).
STOP_JOIN_SECONDS = 10.0


def poll_timeout(request_timeout: float, interval: float) -> float:
    """A poll's read deadline: ``requestTimeoutSeconds``, but at most half the poll interval.

    An answer later than that is as good as lost (the next poll is nearly due), and the
    runner retries a failed poll at once, so a hung request costs half an interval, not
    the request timeout plus a backoff. (GCP's hanging GETs set their own deadline.)
    """
    return min(request_timeout, max(interval / 2, MIN_POLL_TIMEOUT_SECONDS))


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        wiring: CloudWiring | None = None,
        telemetry: AgentTelemetry | None = None,
        control_address: str | None = None,
    ) -> None:
        rt = config.effective_runtime()
        self.config = config
        self.contract = contract_from_config(config.provider, config.notice)
        self.wiring = wiring or wire_cloud(config)
        self.telemetry = telemetry or AgentTelemetry(rt.events_log)
        self.state = WorkloadState()
        self.events: queue.Queue[InterruptionEvent | NoticeWithdrawn | None] = queue.Queue()  # None: stop
        self.stop_event = threading.Event()
        self.identity = unknown_identity(config.provider)
        self.ready_at: float | None = None
        self.responder = Responder(
            self.contract,
            self.state,
            self.telemetry,
            self.wiring.acknowledgers,
            WorkloadHooks(
                notice_signal=actions.parse_signal(rt.notice_signal),
                drain_signal=actions.parse_signal(rt.drain_signal),
                pid_file=rt.workload_pid_file,
                notice_hook=rt.notice_hook,
                drain_hook=rt.drain_hook,
            ),
            on_drained=self._drained,
        )
        monitors = list(self.wiring.monitors)
        self.link: ControllerLink | None = None
        if config.control_store:
            self.link = ControllerLink(
                config.control_store,
                config.pool,
                lambda: self.identity,
                self.telemetry,
                self.stop_event,
                vm_name=rt.vm_name,
                retry_seconds=rt.error_backoff_seconds,
            )
            self.state.commit_listeners.append(self.link.on_report)
            monitors.append(
                DrainMonitor(
                    self.link, rt.control_poll_seconds, rt.drain_budget_seconds, boot_time(seconds_since_boot())
                )
            )
        self.control = ControlServer(
            control_address or config.control_socket, self.state, status=self.status, on_ready=self._workload_ready,
            on_throughput=self._throughput,
        )
        self.runners = [
            MonitorRunner(
                m, self.events, self.stop_event, self.telemetry.metadata_error, self._on_clean, rt.error_backoff_seconds
            )
            for m in monitors
        ]
        self._consumer = threading.Thread(target=self._consume, name="responder", daemon=True)
        self._identity_thread = threading.Thread(target=self._resolve_identity, name="identity", daemon=True)

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> Agent:
        rt = self.config.effective_runtime()
        if rt.telemetry_host is not None:
            self.telemetry.serve(rt.telemetry_host, self.config.telemetry_port)
        # The events log's first record, before any thread can write one (a first clean poll's
        # `ready`, the `identity`, a workload's report): the reader takes the VM's pool from it.
        self.telemetry.log(Started(
            provider=self.config.provider, pool=self.config.pool, control=self.control.url,
            telemetry_port=self.telemetry.http_port, notice=self.contract.model_dump(mode="json", by_alias=True),
        ))  # fmt: skip
        self.control.start()
        if self.link is not None:
            self.link.start()
        self._consumer.start()
        for runner in self.runners:
            runner.start()
        self._identity_thread.start()
        return self

    def stop(self, join_seconds: float = STOP_JOIN_SECONDS) -> None:
        """Stop every thread this agent started, and wait (a bounded time) until they have ended:
        a final-checkpoint wait or an acknowledgement retry loop must not outlive the agent."""
        self.stop_event.set()
        self.state.close()
        self.events.put_nowait(None)
        self.control.stop()
        self.telemetry.close()
        threads = [self._consumer, *self.runners, self._identity_thread]
        if self.link is not None:
            threads.append(self.link.thread)
        end = time.monotonic() + join_seconds
        for thread in threads:
            if thread.is_alive():
                thread.join(max(0.0, end - time.monotonic()))
        left = [t.name for t in threads if t.is_alive()]
        if left:
            log.warning("agent stopped with threads still ending after %.0fs: %s", join_seconds, ", ".join(left))

    def run_forever(self) -> None:
        self.start()
        try:
            while not self.stop_event.wait(1.0):
                pass
        finally:
            self.stop()

    # -- internals ------------------------------------------------------------
    def _consume(self) -> None:
        while not self.stop_event.is_set():
            event = self.events.get()
            if event is None:
                return
            try:
                if isinstance(event, NoticeWithdrawn):
                    self.responder.withdraw(event)
                else:
                    self.responder.handle(event)
            except Exception:  # one bad event must not end the agent
                log.exception("handling %s failed", event)

    def _drained(self, event: InterruptionEvent, outcome: str) -> None:
        """A controller drain with no workload to wait for: nothing is uncommitted, so say so.

        Not when a PID-file workload exists: it cannot report, and its work may not be saved.
        """
        idle = outcome == "no-workload" and self.config.effective_runtime().workload_pid_file is None
        if self.link is not None and event.kind is InterruptionKind.DRAIN and idle:
            self.link.commit(time.time(), basis="no-workload")

    def _on_clean(self, source: str) -> None:
        if source == DRAIN_SOURCE:
            return  # a store read says nothing about the metadata service being ready
        if self.ready_at is None:
            self.ready_at = time.time()
            self.telemetry.ready("agent", seconds_since_boot())

    def _workload_ready(self) -> None:
        if self.state.mark_ready():
            self.telemetry.ready("workload", seconds_since_boot())

    def _throughput(self, sample: ThroughputReport) -> None:
        """A step-time report: logged with this VM's GPU model when the workload did not name one."""
        self.telemetry.throughput(sample, self.identity)

    def _resolve_identity(self) -> None:
        rt = self.config.effective_runtime()
        while not self.stop_event.is_set():
            try:
                self.identity = self.wiring.identity()
            except MetadataError as err:
                self.telemetry.metadata_error("identity", err.reason)
                self.stop_event.wait(rt.error_backoff_seconds)
                continue
            except Exception as err:
                self.telemetry.metadata_error("identity", type(err).__name__)
                self.stop_event.wait(rt.error_backoff_seconds)
                continue
            self.telemetry.identity(self.identity, self.config.pool)
            return

    def status(self) -> dict[str, object]:
        """What ``GET /v1/status`` serves (:class:`~spotgpu.contract.agent_status.AgentStatus`)."""
        link = self.link
        return AgentStatus(
            workload=self.state.view(),
            provider=self.config.provider,
            pool=self.config.pool,
            identity=self.identity.as_dict(),
            agent_ready_at=self.ready_at,
            telemetry_port=self.telemetry.http_port,
            events=[SeenEvent(e.event_id, e.kind, e.source, e.detected_at) for e in self.responder.store.all()],
            acknowledged=list(self.responder.acknowledged),
            reports=list(self.state.reports),
            controller=None if link is None else ControllerLinkStatus(link.url, link.vm_id(), link.last_reported),
        ).to_json()
