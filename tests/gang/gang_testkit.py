"""A gang on one machine: per simulated node one loopback fake metadata server and one real
agent (in this process), and per rank one ``gang_job.py`` subprocess (killed by PID)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotgpu.agent.daemon import Agent
from spotgpu.agent.fakes import FakeAwsImds, FakeAzureImds, FakeGcpMetadata, FakeMetadataServer
from spotgpu.agent.telemetry import AgentTelemetry

sys.path.insert(0, str(Path(__file__).parents[1] / "agent"))
from agent_testkit import fast_config, wait_until

JOB = Path(__file__).with_name("gang_job.py")
REPO = Path(__file__).parents[2]
FAKES = {"aws": FakeAwsImds, "gcp": FakeGcpMetadata, "azure": FakeAzureImds}
NO_AGENT = "127.0.0.1:9"  # discard port: nothing listens, the client says "keep going"

__all__ = ["Cluster", "Node", "Zygote", "alive", "fast_config", "free_port", "wait_until"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    provider: str
    fake: FakeMetadataServer
    agent: Agent

    @property
    def address(self) -> str:
        return self.agent.control.url

    def notice(self, lead: float = 30.0) -> None:
        """A terminal notice from this node's cloud (AWS: ``lead`` s; GCP: 120 s contract; Azure: ``lead``)."""
        if self.provider == "aws":
            assert isinstance(self.fake, FakeAwsImds)
            self.fake.raise_spot(lead=lead)
        elif self.provider == "gcp":
            assert isinstance(self.fake, FakeGcpMetadata)
            self.fake.raise_preempted()
        else:
            assert isinstance(self.fake, FakeAzureImds)
            self.fake.raise_event("Preempt", not_before_in=lead)

    def metric(self, name: str, **labels: str) -> float:
        return self.agent.telemetry.registry.get_sample_value(name, labels) or 0.0


class Zygote:
    """One ``gang_job.py --zygote`` per test session: it imported torch once and forks each launch."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, str(JOB), "--zygote"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def launch(self, out: Path, run: str, world: int, env: dict[str, str]) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"out": str(out), "run": run, "world": world, "env": env}) + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def alive(pid: int) -> bool:
    """Running (not a zombie, not gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@dataclass
class Job:
    run: str
    launcher: int  # PID
    out: Path
    pids: list[int] = field(default_factory=list)

    @property
    def pids_path(self) -> Path:
        return self.out / f"{self.run}.pids"

    @property
    def codes_path(self) -> Path:
        return self.out / f"{self.run}.codes"

    def signal(self, rank: int, sig: signal.Signals) -> None:
        os.kill(self.pids[rank], sig)

    def kill(self) -> None:
        """SIGKILL every rank still alive (by PID), then the launcher."""
        for pid in [*self.pids, self.launcher]:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):  # it ended between the check and the kill
                    os.kill(pid, signal.SIGKILL)


@dataclass
class Cluster:
    out: Path
    zygote: Zygote
    nodes: list[Node] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)

    def add_nodes(self, providers: list[str], **config: Any) -> list[Node]:
        nodes = []
        for provider in providers:
            fake = FAKES[provider](timeout_delay=1.0).start()
            agent = Agent(fast_config(provider, fake.url, **config), telemetry=AgentTelemetry(None)).start()
            nodes.append(Node(provider, fake, agent))
        self.nodes.extend(nodes)
        return nodes

    def launch(self, run: str, world: int, addresses: list[str] | None = None, **env: object) -> Job:
        """Start ``world`` ranks (forked by one launcher); returns once their PIDs are known."""
        child = {
            "MASTER_PORT": str(free_port()),
            "SPOTGPU_CKPT_SESSION": run.replace("-", ""),
            "GANG_CKPT_URL": f"file://{self.out / 'ckpt'}",
            "GANG_AGENTS": ",".join(addresses or [NO_AGENT] * world),
            "OMP_NUM_THREADS": "1",
            **{k: str(v) for k, v in env.items()},
        }
        job = Job(run, self.zygote.launch(self.out, run, world, child), self.out)
        self.jobs.append(job)
        wait_until(lambda: job.pids_path.exists() or not alive(job.launcher), timeout=30)
        job.pids = json.loads(job.pids_path.read_text())
        return job

    def finish(self, job: Job, timeout: float = 60.0) -> list[int]:
        """Per-rank exit codes; at ``timeout`` every rank still running is SIGKILLed (a hang fails the test)."""
        try:
            wait_until(job.codes_path.exists, timeout=timeout, step=0.05)
        except AssertionError:
            job.kill()
            raise AssertionError(f"{job.run}: a rank hung past {timeout}s:\n{self.stderr(job.run)}") from None
        return list(json.loads(job.codes_path.read_text()))

    def steps_done(self, run: str, rank: int = 0) -> int:
        path = self.out / f"{run}-r{rank}.jsonl"
        return path.read_text().count('"step"') if path.exists() else 0

    def wait_steps(self, run: str, steps: int, timeout: float = 60.0) -> None:
        ended = self.out / f"{run}.codes"
        wait_until(lambda: self.steps_done(run) >= steps or ended.exists(), timeout=timeout, step=0.01)
        assert not ended.exists(), f"{run} ended early: {ended.read_text()}\n{self.stderr(run)}"

    def stderr(self, run: str) -> str:
        path = self.out / f"{run}.err"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def result(self, run: str, rank: int) -> dict[str, Any]:
        lines = (self.out / f"{run}-r{rank}.jsonl").read_text().splitlines()
        results = [json.loads(line)["result"] for line in lines if line.startswith('{"result"')]
        return results[-1] if results else {}

    def losses(self, run: str, rank: int) -> dict[int, str]:
        lines = (self.out / f"{run}-r{rank}.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines if line.startswith('{"step"')]
        return {row["step"]: row["loss"] for row in rows}

    def params(self, run: str) -> bytes:
        return (self.out / f"{run}-params.bin").read_bytes()

    def close(self) -> None:
        for job in self.jobs:
            job.kill()
        for node in self.nodes:
            node.agent.stop()
            node.fake.stop()
