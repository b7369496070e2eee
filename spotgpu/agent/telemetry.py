"""Agent telemetry: a Prometheus endpoint and a JSON-lines event log.

The metrics answer the questions the rest of spotgpu asks of a VM: how often
notices come (by kind), how late we saw them, how much lead they gave, whether
the final checkpoint committed and how long it took, and how long a fresh VM
takes from boot to ready (the input for reacquisition latency), and how fast the
workload trains on this VM's GPU model (the step time ``spotgpu profile fit`` turns into
``gpu.relativeThroughput``). Every series is labelled with the VM's identity via
``spotgpu_agent_info``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import IO, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, start_http_server

from spotgpu import catalogue
from spotgpu.agent.events import InterruptionEvent
from spotgpu.agent.identity import VmIdentity
from spotgpu.contract.agent_records import (
    Acknowledge,
    AgentRecord,
    CommitReported,
    FinalCheckpoint,
    FirstStep,
    GangStop,
    Identity,
    Notice,
    NoticeCleared,
    Ready,
    Restored,
    Throughput,
    WorkloadNotified,
    agent_line,
)
from spotgpu.contract.notice import ClearedNotice, NoticeDocument
from spotgpu.contract.throughput import ThroughputReport

LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 5.0, 10.0, 30.0)
LEAD_BUCKETS = (0.0, 5.0, 15.0, 30.0, 60.0, 90.0, 120.0, 300.0, 900.0, 3600.0)
CHECKPOINT_BUCKETS = (1.0, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 300.0)


class AgentTelemetry:
    def __init__(self, log_path: str | None = "-", registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.info = Info("spotgpu_agent", "VM identity: provider, pool, type, zone, capacity", registry=r)
        self.notices = Counter(
            "spotgpu_agent_notices", "Interruption notices acted on, by kind and source", ["kind", "source"], registry=r
        )
        self.unknown_values = Counter(
            "spotgpu_agent_unknown_values",
            "Notices carrying a value this agent does not know (read as the safest kind), by source and value",
            ["source", "value"],
            registry=r,
        )
        self.duplicates = Counter(
            "spotgpu_agent_duplicate_notices", "Re-served notices ignored by de-duplication", ["source"], registry=r
        )
        self.detection_latency = Histogram(
            "spotgpu_agent_detection_latency_seconds",
            "Notice publish time (or last clean poll) to detection",
            ["source"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.lead_time = Histogram(
            "spotgpu_agent_notice_lead_seconds",
            "Deadline minus detection time",
            ["kind"],
            buckets=LEAD_BUCKETS,
            registry=r,
        )
        self.final_checkpoints = Counter(
            "spotgpu_agent_final_checkpoints",
            "Final checkpoint outcomes: committed | failed | timeout | no-workload",
            ["outcome"],
            registry=r,
        )
        self.final_checkpoint_seconds = Histogram(
            "spotgpu_agent_final_checkpoint_seconds",
            "Duration of the final checkpoint as the workload reported it",
            buckets=CHECKPOINT_BUCKETS,
            registry=r,
        )
        self.boot_to_ready = Gauge(
            "spotgpu_agent_boot_to_ready_seconds",
            "Seconds from kernel boot to ready (stage=agent: first clean poll; stage=workload: workload ready)",
            ["stage"],
            registry=r,
        )
        self.metadata_errors = Counter(
            "spotgpu_agent_metadata_errors",
            "Failed metadata rounds, by source and reason",
            ["source", "reason"],
            registry=r,
        )
        self.notices_cleared = Counter(
            "spotgpu_agent_notices_cleared",
            "Early notices that went away (the VM accepts work again), by source",
            ["source"],
            registry=r,
        )
        self.acknowledgements = Counter(
            "spotgpu_agent_acknowledgements", "Notices acknowledged to the cloud, by result", ["result"], registry=r
        )
        self.controller_reports = Counter(
            "spotgpu_agent_controller_reports",
            "Committed checkpoints reported to the fallback controller's store, by result",
            ["result"],
            registry=r,
        )
        self.gang_stops = Counter(
            "spotgpu_agent_gang_stops",
            "Gang stops this VM's rank took part in: role = noticed | peer, outcome = committed | failed | "
            "skipped | peer-lost",
            ["role", "outcome"],
            registry=r,
        )
        self.step_seconds = Gauge(
            "spotgpu_agent_step_seconds",
            "Mean seconds per training step the workload last reported, by GPU model (unknown: not known)",
            ["gpu_model"],
            registry=r,
        )
        self.training_steps = Counter(
            "spotgpu_agent_training_steps",
            "Training steps the workload's throughput reports covered, by GPU model",
            ["gpu_model"],
            registry=r,
        )
        self._log_path = log_path
        self._log_lock = threading.Lock()
        self._log_file: IO[str] | None = None
        self.http_port: int | None = None
        self._http_server: Any = None

    # -- sinks --------------------------------------------------------------
    def serve(self, host: str, port: int) -> int:
        """Start the Prometheus endpoint; returns the bound port (port 0 picks one)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._http_server = server
        self.http_port = int(server.server_port)
        return self.http_port

    def close(self) -> None:
        """Stop the Prometheus endpoint and close the events log (a later record reopens it)."""
        server, self._http_server = self._http_server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        with self._log_lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def log(self, record: AgentRecord) -> None:
        """Write one record of the events log (:mod:`spotgpu.contract.agent_records`), stamped now."""
        if self._log_path is None:
            return
        line = json.dumps(agent_line(record, round(time.time(), 6)), default=str, sort_keys=True)
        with self._log_lock:
            try:
                if self._log_path == "-":
                    print(line, file=sys.stdout, flush=True)
                    return
                if self._log_file is None:
                    self._log_file = open(self._log_path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
                self._log_file.write(line + "\n")
                self._log_file.flush()
            except OSError as err:  # a full disk must not stop a drain
                print(f"spotgpu agent: event log write failed: {err}", file=sys.stderr)

    # -- records ------------------------------------------------------------
    def identity(self, ident: VmIdentity, pool: str) -> None:
        labels = {**ident.as_dict(), "pool": pool}
        self.info.info(labels)
        self.log(Identity.from_fields(labels))

    def notice(self, event: InterruptionEvent, deadline: float | None, basis: str) -> None:
        self.notices.labels(kind=str(event.kind), source=event.source).inc()
        if event.unknown_value is not None:
            self.unknown_values.labels(source=event.source, value=event.unknown_value[:64]).inc()
        latency = event.detection_latency()
        if latency is not None:
            self.detection_latency.labels(source=event.source).observe(latency)
        lead = None if deadline is None else deadline - event.detected_at
        if lead is not None:
            self.lead_time.labels(kind=str(event.kind)).observe(max(0.0, lead))
        self.log(Notice(
            kind=event.kind, source=event.source, event_id=event.event_id, detected_at=event.detected_at,
            deadline=deadline, deadline_basis=basis, lead_seconds=lead, detection_latency_seconds=latency,
            raw=event.raw, unparsed_time=event.unparsed_time, unknown_value=event.unknown_value,
        ))  # fmt: skip

    def workload_notified(self, phase: str, notice: NoticeDocument, now: float) -> None:
        """The workload was told (its phase, and the notice as served, its budget counted ``now``)."""
        self.log(WorkloadNotified.of(phase, notice, now))

    def notice_cleared(self, cleared: ClearedNotice) -> None:
        self.notices_cleared.labels(source=cleared.source).inc()
        self.log(NoticeCleared.of(cleared))

    def duplicate(self, event: InterruptionEvent) -> None:
        self.duplicates.labels(source=event.source).inc()

    def final_checkpoint(
        self, outcome: str, seconds: float | None, event_id: str, report: dict[str, Any] | None = None
    ) -> None:
        self.final_checkpoints.labels(outcome=outcome).inc()
        if seconds is not None:
            self.final_checkpoint_seconds.observe(seconds)
        self.log(FinalCheckpoint(outcome=outcome, seconds=seconds, event_id=event_id, report=report))

    def gang_report(self, report: dict[str, Any]) -> None:
        """A multi-node job's stop (``gang-stop``) or resume (``restored``) as its rank reported it."""
        if report.get("checkpoint") == "restore":
            self.log(Restored(step=report.get("step"), generation=report.get("generation"), source=report.get("source"),
                              seconds=report.get("seconds"), nbytes=report.get("bytes"), reason=report.get("reason"),
                              started_at=report.get("startedAt")))  # fmt: skip
            return
        if report.get("checkpoint") == "step":
            self.log(FirstStep(step=report.get("step")))
            return
        self.gang_stops.labels(role=str(report.get("role")), outcome=str(report.get("outcome"))).inc()
        self.log(GangStop.from_fields(report))

    def throughput(self, sample: ThroughputReport, ident: VmIdentity) -> None:
        """One step-time report, with the GPU model it was measured on: the client's, else this VM's own.

        ``gpuModelSource`` says which (``client``, ``catalogue``, or ``unknown`` when neither knows:
        the identity is not read yet, or a type the catalogue does not map, such as GCP N1 with
        attached GPUs), so the fit can tell a measured speed from a guessed one.
        """
        model, source = sample.gpu_model, "client"
        if model is None:
            model = gpu_model_of(ident)
            source = "unknown" if model is None else "catalogue"
        label = model or "unknown"
        self.step_seconds.labels(gpu_model=label).set(sample.step_seconds)
        self.training_steps.labels(gpu_model=label).inc(sample.steps)
        self.log(Throughput(step_seconds=sample.step_seconds, steps=sample.steps, gpu_model=model,
                            gpu_model_source=source))  # fmt: skip

    def ready(self, stage: str, boot_seconds: float | None) -> None:
        if boot_seconds is not None:
            self.boot_to_ready.labels(stage=stage).set(boot_seconds)
        self.log(Ready(stage=stage, boot_to_ready_seconds=boot_seconds))

    def metadata_error(self, source: str, reason: str) -> None:
        self.metadata_errors.labels(source=source, reason=reason).inc()

    def acknowledged(self, result: str, event: InterruptionEvent, error: str | None = None) -> None:
        self.acknowledgements.labels(result=result).inc()
        self.log(Acknowledge(result=result, event_id=event.event_id, source=event.source, error=error))

    def controller_report(self, result: str, at: float, vm_id: str, error: str | None = None) -> None:
        self.controller_reports.labels(result=result).inc()
        self.log(CommitReported(result=result, last_committed_at=at, vm_id=vm_id, error=error))


def gpu_model_of(ident: VmIdentity) -> str | None:
    """The GPU model of this VM's type by the catalogue (AWS instance type, GCP machine type, Azure VM size).

    None before the identity is read, and for a type the catalogue does not map to one model
    (GCP N1 machine types carry attached accelerators the metadata does not name).
    """
    lookup = {"aws": catalogue.aws_gpu, "gcp": catalogue.gcp_machine, "azure": catalogue.azure_size}.get(ident.provider)
    shape = lookup(ident.instance_type) if lookup is not None and ident.instance_type else None
    return None if shape is None else shape.gpu_model


def seconds_since_boot(proc_uptime: str = "/proc/uptime") -> float | None:
    """Kernel uptime, the 'boot' end of boot-to-ready; None where /proc is absent."""
    try:
        with open(proc_uptime, encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
