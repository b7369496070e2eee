"""The one bootstrap renderer every cloud's pool uses.

It renders a shell script (AWS user data, GCP startup script, Azure custom data)
that installs the spotgpu runtime into its own virtualenv, writes the agent's
config (this pool's notice contract, checkpoint store and interval) and starts
``spotgpu-agent.service`` under systemd. Output is deterministic so it can be
snapshot-tested and so an unchanged pool produces no diff in ``pulumi preview``.
"""

from __future__ import annotations

import base64
import json
import shlex

from spotgpu.agent.config import AGENT_EXEC_START, AgentConfig
from spotgpu.bootstrap_tier import TIER_UNIT, render_tier_setup
from spotgpu.contract.tags import AGENT_MARKER
from spotgpu.gang.launch import GangLaunch, launcher_argv
from spotgpu.models.base import FieldProblem
from spotgpu.models.tiers import LOCAL_DIR_ENV

#: AWS launch-template user data is limited to 16 KB (before base64); Azure custom data to 64 KB.
MAX_BOOTSTRAP_BYTES = {"aws": 16 * 1024, "gcp": 256 * 1024, "azure": 64 * 1024 - 1}
#: The gang launch unit (pools that run gangs only): ``spotgpu gang run -- torchrun ...``.
GANG_UNIT = "spotgpu-gang.service"
SPOTGPU_BIN = "/opt/spotgpu/venv/bin/spotgpu"


#: Where a pool's controller keeps its record, drain requests and agent commits, under the
#: pool's checkpoint store (the GCP controller's IAM condition is scoped to this prefix).
CONTROL_STORE_SUFFIX = "_controller"


def control_store_url(checkpoint_store: str) -> str:
    """The controller's ``stateUrl`` for a pool: its checkpoint store URL + ``/_controller``.

    Parsed by the checkpoint library's one parser. An Azure store is written as its blob
    endpoint URL (``https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX``), which every
    spotgpu version's state store opens, old ones included; ``az://ACCOUNT/CONTAINER/PREFIX``
    names the same place.
    """
    from spotgpu.storage.urls import parse_store_url

    try:
        where = parse_store_url(checkpoint_store.rstrip("/"))
    except ValueError as err:
        raise ValueError(f"checkpoint store: {err}") from None
    if where.account is not None:
        base = f"https://{where.account}.blob.core.windows.net/{where.bucket}"
        base = f"{base}/{where.prefix}" if where.prefix else base
    else:
        base = where.text
    return f"{base}/{CONTROL_STORE_SUFFIX}"


def gang_unit(launch: GangLaunch, control_socket: str, local_dir: str | None = None) -> str:
    """The systemd unit that supervises a gang job on this VM (see spotgpu.gang.launch).

    ``spotgpu gang run`` does the restarting by the workers' exit code (75/76 rejoin at
    once, real failures ``maxFailures`` times) and exits 0 once this VM drains, so systemd
    only restarts it if it dies abnormally (a signal, a core dump), never on an exit code.
    """
    command = shlex.join(launcher_argv(launch, spotgpu=SPOTGPU_BIN))
    tier = f"Environment={LOCAL_DIR_ENV}={local_dir}\n" if local_dir else ""
    after = f"{AGENT_MARKER} {TIER_UNIT}" if local_dir else AGENT_MARKER
    return f"""[Unit]
Description=spotgpu gang launch (torchrun, rendezvous {launch.rendezvous_host}:{launch.rendezvous_port})
After={after} network-online.target
Wants={after} network-online.target

[Service]
Environment=SPOTGPU_AGENT={control_socket}
{tier}ExecStart={command}
Restart=on-abnormal
RestartSec=5

[Install]
WantedBy=multi-user.target
"""


def render_bootstrap(config: AgentConfig, agent_package: str = "spotgpu", gang: GangLaunch | None = None) -> str:
    """A POSIX shell script that installs and starts the node agent (and, for a gang pool, the launch)."""
    cfg = json.dumps(config.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True, indent=1)
    script = f"""#!/bin/bash
# spotgpu bootstrap: install the node agent for pool {config.pool} ({config.provider}, {config.capacity_type}).
# Periodic checkpoints protect the work; the agent turns a notice into stop-new-work,
# a best-effort final checkpoint and a drain.
set -euo pipefail
install -d -m 0755 /etc/spotgpu /opt/spotgpu /run/spotgpu
cat > /etc/spotgpu/agent.json <<'SPOTGPU_CONFIG'
{cfg}
SPOTGPU_CONFIG
if [ ! -x /opt/spotgpu/venv/bin/spotgpu ]; then
  python3 -m venv /opt/spotgpu/venv
  /opt/spotgpu/venv/bin/pip install --quiet {shlex.quote(agent_package)}
fi
{_tier_setup(config, gang)}cat > /etc/systemd/system/{AGENT_MARKER} <<'SPOTGPU_UNIT'
[Unit]
Description=spotgpu node agent (interruption notices, drain, telemetry)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart={AGENT_EXEC_START}
Restart=always
RestartSec=2
RuntimeDirectory=spotgpu

[Install]
WantedBy=multi-user.target
SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now {AGENT_MARKER}
"""
    if gang is not None:
        script += f"""cat > /etc/systemd/system/{GANG_UNIT} <<'SPOTGPU_UNIT'
{gang_unit(gang, config.control_socket, config.local_tier.path if config.local_tier else None)}SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now {GANG_UNIT}
"""
    limit = MAX_BOOTSTRAP_BYTES[config.provider]
    if len(script.encode()) > limit:
        raise FieldProblem(
            f"makes the bootstrap {len(script.encode())} bytes, over the {config.provider} limit of {limit}",
            at="agentPackage", value=agent_package, fix="shorten agentPackage or the checkpoint store URL",
        )
    return script


def _tier_setup(config: AgentConfig, gang: GangLaunch | None) -> str:
    """A tiered workload's local tier (:mod:`spotgpu.bootstrap_tier`), mounted before the agent and the job start."""
    if config.local_tier is None:
        return ""
    return render_tier_setup(config.provider, config.local_tier, (AGENT_MARKER, GANG_UNIT) if gang else (AGENT_MARKER,))


def render_bootstrap_b64(config: AgentConfig, agent_package: str = "spotgpu", gang: GangLaunch | None = None) -> str:
    """Base64 form for AWS launch-template user data and Azure custom data."""
    return base64.b64encode(render_bootstrap(config, agent_package, gang).encode()).decode()


#: The rendezvous host's unit: ``spotgpu gang store`` (torch's TCPStore), restarted whenever it stops.
STORE_UNIT = "spotgpu-gang-store.service"
#: The store host needs torch for the TCPStore, not CUDA: the CPU wheels are a tenth of the size.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def render_store_bootstrap(port: int, agent_package: str = "spotgpu") -> str:
    """User data of a gang's rendezvous host: install spotgpu and torch (CPU), serve the store on ``port``."""
    return f"""#!/bin/bash
# spotgpu rendezvous host: serves a gang's torchrun c10d rendezvous store on port {port}.
# It runs on demand so that no spot notice can take the gang's next rendezvous down.
set -euo pipefail
install -d -m 0755 /opt/spotgpu
if [ ! -x /opt/spotgpu/venv/bin/spotgpu ]; then
  python3 -m venv /opt/spotgpu/venv
  /opt/spotgpu/venv/bin/pip install --quiet torch --index-url {TORCH_CPU_INDEX}
  /opt/spotgpu/venv/bin/pip install --quiet {shlex.quote(agent_package)}
fi
cat > /etc/systemd/system/{STORE_UNIT} <<'SPOTGPU_UNIT'
[Unit]
Description=spotgpu gang rendezvous store (torch TCPStore on port {port})
After=network-online.target
Wants=network-online.target

[Service]
ExecStart={SPOTGPU_BIN} gang store --port {port}
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now {STORE_UNIT}
"""
