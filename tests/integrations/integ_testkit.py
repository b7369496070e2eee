"""Helpers the integration tests import by name: simulated nodes (a loopback fake GCP
metadata server + a real agent each) and rank processes with hard timeouts, killed by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotgpu.agent.config import AgentConfig, AgentRuntime
from spotgpu.agent.daemon import Agent
from spotgpu.agent.fakes import FakeGcpMetadata
from spotgpu.agent.telemetry import AgentTelemetry

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Node:
    fake: FakeGcpMetadata
    agent: Agent

    @property
    def address(self) -> str:
        return self.agent.control.url


@contextmanager
def nodes(count: int) -> Iterator[list[Node]]:
    """``count`` simulated VMs with test-speed agent timings, stopped on exit."""
    started: list[Node] = []
    try:
        for _ in range(count):
            fake = FakeGcpMetadata(timeout_delay=1.0).start()
            runtime = AgentRuntime(
                metadata_url=fake.url,
                poll_interval_seconds=0.2,
                hanging_get_timeout_seconds=2,
                request_timeout_seconds=0.5,
                error_backoff_seconds=0.1,
                telemetry_host=None,
                events_log=None,
            )
            config = AgentConfig(
                provider="gcp",
                pool="gcp-pool",
                notice={"provider": "gcp", "safetyMarginSeconds": 1.0},
                checkpoint_store="file:///tmp/unused",
                checkpoint_interval_seconds=600,
                control_socket="127.0.0.1:0",
                telemetry_port=0,
                runtime=runtime,
            )
            started.append(Node(fake, Agent(config, telemetry=AgentTelemetry(None)).start()))
        yield started
    finally:
        for node in started:
            node.agent.stop()
            node.fake.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def ranks(
    script: Path,
    args: Sequence[str],
    world: int,
    agents: Sequence[str | None],
    log_dir: Path,
    cwd: Path | None = None,
    envs: Sequence[Mapping[str, str]] = (),
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """One process per rank (gloo on loopback through MASTER_ADDR/PORT); on exit any rank
    still running is killed by PID (its process group), so nothing outlives the test.
    ``envs``: per rank, variables of its own (its VM's local tier and zone)."""
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        for rank in range(world):
            env = dict(os.environ)
            env.update(
                PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
                SPOTGPU_AGENT=agents[rank] or str(log_dir / "no-agent.sock"),
                OMP_NUM_THREADS="1",
                TOKENIZERS_PARALLELISM="false",
                HF_HUB_OFFLINE="1",
            )
            if world > 1:
                env.update(
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                    RANK=str(rank),
                    LOCAL_RANK=str(rank),
                    WORLD_SIZE=str(world),
                    LOCAL_WORLD_SIZE=str(world),
                )
            if envs:
                env.update(envs[rank])
            with open(log_dir / f"rank{rank}.log", "wb") as out:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(script), *args],
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        cwd=cwd,
                    )
                )
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_all(procs: Sequence[subprocess.Popen[bytes]], timeout: float, log_dir: Path) -> list[int]:
    end = time.monotonic() + timeout
    codes: list[int] = []
    for rank, proc in enumerate(procs):
        try:
            codes.append(proc.wait(max(0.1, end - time.monotonic())))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"rank {rank} still running after {timeout}s:\n{tail(log_dir, rank)}") from None
    return codes


def wait_for(path: Path, timeout: float, procs: Sequence[subprocess.Popen[bytes]], log_dir: Path) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        for rank, proc in enumerate(procs):
            if proc.poll() is not None:
                raise AssertionError(f"rank {rank} exited {proc.returncode} early:\n{tail(log_dir, rank)}")
        if time.monotonic() > end:
            raise AssertionError(f"{path.name} not written within {timeout}s")
        time.sleep(0.05)


def wait_for_value(
    probe: Callable[[], Any], timeout: float, procs: Sequence[subprocess.Popen[bytes]], log_dir: Path
) -> Any:
    end = time.monotonic() + timeout
    while not (value := probe()):
        for rank, proc in enumerate(procs):
            if proc.poll() is not None:
                raise AssertionError(f"rank {rank} exited {proc.returncode} early:\n{tail(log_dir, rank)}")
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.02)
    return value


def tail(log_dir: Path, rank: int, lines: int = 40) -> str:
    return "\n".join((log_dir / f"rank{rank}.log").read_text(errors="replace").splitlines()[-lines:])


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def check_gang_stop_and_resume(job: Path, tmp: Path, world: int, steps: int, stop_at: int) -> None:
    """The scenario both framework tests run (``job`` takes the hf_job.py arguments).

    1. ``world`` ranks, one simulated VM each; the last rank holds step ``stop_at`` until its
       agent has a notice, which the test raises on that VM only: every rank must stop at
       ``stop_at``, commit one final generation together and exit 75; that VM drains.
    2. A restarted job on fresh VMs resumes from that generation and runs to the end, then
       trains an uninterrupted reference: losses per step and final parameters must be equal.
    """
    from spotgpu.gang import EXIT_GANG_STOP

    url = f"file://{tmp / 'store'}"
    noticed = world - 1
    first, second = tmp / "interrupted", tmp / "resumed"
    with nodes(world) as vms:
        args = [str(first), url, "--steps", str(steps), "--stop-at", str(stop_at), "--noticed-rank", str(noticed)]
        with ranks(job, args, world, [vm.address for vm in vms], first) as procs:
            wait_for(first / f"ready-r{noticed}", 90, procs, first)
            vms[noticed].fake.raise_preempted()
            assert wait_all(procs, 60, first) == [EXIT_GANG_STOP] * world
        assert vms[noticed].agent.state.phase in ("draining", "drained")
        assert all(vm.agent.state.phase == "running" for vm in vms[:noticed])  # peers are not drained
    with nodes(world) as vms:
        args = [str(second), url, "--steps", str(steps), "--then-reference"]
        with ranks(job, args, world, [vm.address for vm in vms], second) as procs:
            assert wait_all(procs, 120, second) == [0] * world
    for rank in range(world):
        stopped = read_json(first / f"result-r{rank}-from0.json")["run"]
        assert stopped["stop"] == stop_at and stopped["final"] is True, stopped
        results = read_json(second / f"result-r{rank}-from{stop_at}.json")
        assert results["run"]["restored"] == stop_at
        before = read_json(first / f"run-losses-r{rank}-from0.json")
        after = read_json(second / f"run-losses-r{rank}-from{stop_at}.json")
        assert sorted(map(int, before)) == list(range(1, stop_at + 1))
        assert sorted(map(int, after)) == list(range(stop_at + 1, steps + 1))
        assert {**before, **after} == read_json(second / f"reference-losses-r{rank}-from0.json")
        assert results["run"]["params"] == results["reference"]["params"]
