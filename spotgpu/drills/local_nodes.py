"""One simulated VM of the local gang drill: a loopback fake metadata server, a real
``spotgpu agent run`` and a real ``spotgpu gang run -- torchrun ...``, as on a pool's VM.

Every process a node starts carries ``SPOTGPU_DRILL_NODE=<token>`` in its environment, so the
drill can find and kill all of them by PID, torchrun's workers included (torchrun starts each
worker in a session of its own, out of reach of a process-group kill).

Each node has a local disk of its own (``<workdir>/local``, exported as ``SPOTGPU_LOCAL_DIR``: a
tiered checkpoint's local tier, named in its agent config's ``localTier``) and a zone
(``SPOTGPU_ZONE``); reclaiming the node deletes its disk, as a cloud's reclaim takes a VM's
instance store or local SSD with it. Each node takes a *slot* and the loopback address
``127.0.0.<100 + slot>`` as its torchrun address: torchrun's rendezvous orders ranks by node
address, so a node keeps its rank across restarts and a replacement takes the rank of the VM it
replaces (a MIG recreates a VM under its name; elsewhere ranks may move, and a tiered restore
then reads a moved rank's shard from whichever node holds it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from spotgpu.agent.client import ENV_ADDRESS
from spotgpu.agent.config import AgentConfig, AgentRuntime
from spotgpu.agent.fakes import FakeAwsImds, FakeAzureImds, FakeGcpMetadata, FakeMetadataServer
from spotgpu.gang.launch import GangLaunch, launcher_argv
from spotgpu.integrations.schedule import AGENT_CONFIG_ENV, CHECKPOINT_URL_ENV
from spotgpu.models.notice import default_notice
from spotgpu.models.tiers import LOCAL_DIR_ENV, ZONE_ENV, LocalTierConfig

NODE_ENV = "SPOTGPU_DRILL_NODE"
FAKES: dict[str, type[FakeMetadataServer]] = {"aws": FakeAwsImds, "gcp": FakeGcpMetadata, "azure": FakeAzureImds}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spotgpu_argv() -> list[str]:
    """The ``spotgpu`` command as this interpreter runs it (no reliance on PATH)."""
    return [sys.executable, "-m", "spotgpu"]


@dataclass
class Node:
    """One simulated VM; ``index`` is the drill's name for it (replacements get new ones)."""

    index: int
    provider: str
    workdir: Path
    zone: str = "zone-a"
    slot: int = 0
    #: the local tier the agent config names (None: the job keeps every save in the store)
    tier: LocalTierConfig | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    fake: FakeMetadataServer | None = None
    agent: subprocess.Popen[bytes] | None = None
    launcher: subprocess.Popen[bytes] | None = None
    address: str = ""
    started_at: float = 0.0
    launcher_exit: int | None = None
    launcher_exited_at: float | None = None
    _logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"node{self.index}"

    @property
    def events_path(self) -> Path:
        return self.workdir / "events.jsonl"

    @property
    def local_dir(self) -> Path:
        """This VM's local disk (its instance store): gone with the VM."""
        return self.workdir / "local"

    def start(self, launch: GangLaunch, checkpoint_store: str, env: dict[str, str]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.local_dir.mkdir(exist_ok=True)
        self.started_at = time.time()
        self.fake = FAKES[self.provider]().start()
        self.address = f"127.0.0.1:{free_port()}"
        notice = default_notice(self.provider)  # type: ignore[arg-type]
        config = AgentConfig(
            provider=self.provider,  # type: ignore[arg-type]
            pool="drill-local",
            notice=notice.model_dump(mode="json", by_alias=True),
            checkpoint_store=checkpoint_store,
            checkpoint_interval_seconds=600,
            local_tier=None if self.tier is None else self.tier.model_copy(update={"path": str(self.local_dir)}),
            control_socket=self.address,
            telemetry_port=0,
            runtime=AgentRuntime(
                metadata_url=self.fake.url,
                poll_interval_seconds=0.25,  # at or above every provider's floor (Azure IMDS: 5 requests/s)
                hanging_get_timeout_seconds=2,
                request_timeout_seconds=0.5,
                error_backoff_seconds=0.1,
                telemetry_host=None,
                events_log=str(self.events_path),
            ),
        )
        config_path = self.workdir / "agent.json"
        config_path.write_text(config.model_dump_json(by_alias=True, exclude_none=True), encoding="utf-8")
        # What a job reads on a pool VM, pointed at this simulated one: the agent, its config
        # (pool_interval_seconds) and the store (checkpoint_url): a docs recipe runs unchanged.
        node_env = {**env, NODE_ENV: self.token, ENV_ADDRESS: self.address, AGENT_CONFIG_ENV: str(config_path),
                    CHECKPOINT_URL_ENV: checkpoint_store, ZONE_ENV: self.zone}  # fmt: skip
        if self.tier is not None:
            node_env[LOCAL_DIR_ENV] = str(self.local_dir)
        launch = launch.model_copy(update={"local_addr": f"127.0.0.{100 + self.slot}"})
        self.agent = self._spawn([*spotgpu_argv(), "agent", "run", "--config", str(config_path)], "agent.log", node_env)
        self._wait_agent()
        argv = launcher_argv(launch, spotgpu="spotgpu")
        self.launcher = self._spawn(
            [*spotgpu_argv(), *argv[1:3], "--agent", self.address, *argv[3:]], "launcher.log", node_env
        )

    def _spawn(self, argv: list[str], log_name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / log_name).open("ab")
        self._logs.append(log)
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def _wait_agent(self, timeout: float = 60.0) -> None:
        host, port = self.address.rsplit(":", 1)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.agent is not None and self.agent.poll() is not None:
                last = self._last_line("agent.log")
                raise RuntimeError(f"{self.name}: the agent exited with {self.agent.returncode}: {last} "
                                   f"(all of it: {self.workdir}/agent.log)")  # fmt: skip
            try:
                socket.create_connection((host, int(port)), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"{self.name}: the agent did not answer on {self.address} within {timeout:.0f}s")

    def _last_line(self, log_name: str) -> str:
        """The last line of a node's log (an ImportError, say), so the drill's own message carries it."""
        try:
            lines = [line for line in (self.workdir / log_name).read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "(no log)"
        return lines[-1].strip() if lines else "(empty log)"

    def raise_notice(self, lead_seconds: float | None) -> float:
        fake = self.fake
        if isinstance(fake, FakeAwsImds):
            return fake.raise_spot(lead=120.0 if lead_seconds is None else lead_seconds)
        if isinstance(fake, FakeGcpMetadata):
            return fake.raise_preempted()
        assert isinstance(fake, FakeAzureImds)
        fake.raise_event("Preempt", not_before_in=30.0 if lead_seconds is None else lead_seconds)
        assert fake.raised_at is not None
        return fake.raised_at

    def events(self) -> list[dict[str, Any]]:
        try:
            lines = self.events_path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line being written
        return out

    def poll(self) -> int | None:
        """The launcher's exit code once it exited (recording when)."""
        if self.launcher is not None and self.launcher_exit is None:
            code = self.launcher.poll()
            if code is not None:
                self.launcher_exit, self.launcher_exited_at = code, time.time()
        return self.launcher_exit

    def pids(self) -> list[int]:
        """Every live process this node started (agent, launcher, torchrun, workers)."""
        marker = f"{NODE_ENV}={self.token}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def kill(self, grace_seconds: float = 2.0, *, abrupt: bool = False) -> None:
        """Reclaim the VM: SIGTERM everything it runs, SIGKILL what is left after the grace (``abrupt``:
        SIGKILL at once, a reclaim nobody was told of). Its local disk goes with it."""
        self.poll()
        for sig in (signal.SIGKILL,) if abrupt else (signal.SIGTERM, signal.SIGKILL):
            pids = self.pids()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            end = time.monotonic() + grace_seconds
            while pids and time.monotonic() < end:
                time.sleep(0.05)
                pids = self.pids()
            if not pids:
                break
        for proc in (self.agent, self.launcher):
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        if self.fake is not None:
            self.fake.stop()
            self.fake = None
        for log in self._logs:
            log.close()
        self._logs.clear()
        shutil.rmtree(self.local_dir, ignore_errors=True)
