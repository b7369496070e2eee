"""Snapshot of the rendered bootstrap per provider, and its link to the agent CLI.

The rendered script is user data on every pool VM; any change to it replaces
every VM on the next ``pulumi up``, so it must only change on purpose.
To accept an intended change: ``SPOTGPU_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/agent/test_bootstrap_snapshot.py``
and review the diff of ``tests/agent/snapshots/``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
from pathlib import Path

import pytest

from spotgpu.agent.cli import cmd_run
from spotgpu.agent.config import AGENT_CONFIG_PATH, AgentConfig, AgentRuntime
from spotgpu.bootstrap import MAX_BOOTSTRAP_BYTES, render_bootstrap, render_bootstrap_b64
from spotgpu.cli import build_parser
from spotgpu.models.notice import default_notice
from spotgpu.models.tiers import LocalTierConfig

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("SPOTGPU_UPDATE_SNAPSHOTS") == "1"

CONFIGS = {
    "aws": AgentConfig(
        provider="aws",
        pool="train-a100",
        notice=default_notice("aws").model_dump(mode="json", by_alias=True),
        checkpoint_store="s3://spotgpu-ckpt-prod/train-a100",
        checkpoint_interval_seconds=900,
        lifecycle_hook="spotgpu-drain",
        autoscaling_group="train-a100-asg",
    ),
    "gcp": AgentConfig(
        provider="gcp",
        pool="train-l4",
        notice=default_notice("gcp").model_dump(mode="json", by_alias=True),
        checkpoint_store="gs://spotgpu-ckpt-prod/train-l4",
        checkpoint_interval_seconds=600,
    ),
    "azure": AgentConfig(
        provider="azure",
        pool="train-t4",
        capacity_type="on-demand",
        notice=default_notice("azure").model_dump(mode="json", by_alias=True),
        checkpoint_store="az://spotgpuckpt/checkpoints/train-t4",
        checkpoint_interval_seconds=300,
    ),
}


@pytest.mark.parametrize("provider", sorted(CONFIGS))
def test_rendered_bootstrap_matches_the_snapshot(provider: str) -> None:
    rendered = render_bootstrap(CONFIGS[provider], "spotgpu==0.1.0")
    path = SNAPSHOTS / f"{provider}.sh"
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"no snapshot {path}; create it with SPOTGPU_UPDATE_SNAPSHOTS=1")
        path.write_text(rendered, encoding="utf-8")
    assert rendered == path.read_text(encoding="utf-8"), (
        f"bootstrap for {provider} changed; if intended, rerun with SPOTGPU_UPDATE_SNAPSHOTS=1 and review the diff"
    )


@pytest.mark.parametrize("provider", sorted(CONFIGS))
def test_exec_start_is_a_command_the_cli_accepts(provider: str) -> None:
    rendered = render_bootstrap(CONFIGS[provider])
    [exec_start] = re.findall(r"^ExecStart=(.*)$", rendered, flags=re.M)
    argv = shlex.split(exec_start)
    assert argv[0].endswith("/bin/spotgpu")
    args = build_parser().parse_args(argv[1:])
    assert args.func is cmd_run
    assert args.config == AGENT_CONFIG_PATH


@pytest.mark.parametrize("provider", sorted(CONFIGS))
def test_embedded_config_reads_back_as_the_same_agent_config(provider: str) -> None:
    rendered = render_bootstrap(CONFIGS[provider])
    body = rendered.split("<<'SPOTGPU_CONFIG'\n", 1)[1].split("\nSPOTGPU_CONFIG\n", 1)[0]
    assert AgentConfig.model_validate(json.loads(body)) == CONFIGS[provider]
    assert f"cat > {AGENT_CONFIG_PATH} <<'SPOTGPU_CONFIG'" in rendered


def test_runtime_tuning_is_omitted_by_default_and_rendered_when_set() -> None:
    plain = render_bootstrap(CONFIGS["gcp"])
    assert '"runtime"' not in plain
    tuned = CONFIGS["gcp"].model_copy(update={"runtime": AgentRuntime(notice_signal="SIGUSR1")})
    assert '"noticeSignal": "SIGUSR1"' in render_bootstrap(tuned)


def test_b64_is_the_same_script() -> None:
    config = CONFIGS["azure"]
    assert base64.b64decode(render_bootstrap_b64(config)).decode() == render_bootstrap(config)


def test_oversized_bootstrap_names_the_limit_and_the_fix() -> None:
    config = CONFIGS["aws"].model_copy(update={"checkpoint_store": "s3://b/" + "x" * MAX_BOOTSTRAP_BYTES["aws"]})
    with pytest.raises(ValueError, match="over the aws limit of 16384; shorten"):
        render_bootstrap(config)


#: A tiered workload's pool (issue 33): the same agents, with the local tier the bootstrap mounts.
TIER = LocalTierConfig(path="/var/lib/spotgpu/local", keep=2, peer_copies=1, durable_interval_seconds=8910,
                       ram_disk_gib=224)  # fmt: skip


@pytest.mark.parametrize("provider", sorted(CONFIGS))
def test_tiered_bootstrap_matches_the_snapshot(provider: str) -> None:
    """The user data that mounts the local NVMe (or the RAM disk) per cloud, reviewed as a whole."""
    rendered = render_bootstrap(CONFIGS[provider].model_copy(update={"local_tier": TIER}), "spotgpu==0.1.0")
    path = SNAPSHOTS / f"{provider}-tiered.sh"
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"no snapshot {path}; create it with SPOTGPU_UPDATE_SNAPSHOTS=1")
        path.write_text(rendered, encoding="utf-8")
    assert rendered == path.read_text(encoding="utf-8"), (
        f"tiered bootstrap for {provider} changed; if intended, rerun with SPOTGPU_UPDATE_SNAPSHOTS=1 and review the diff"
    )
    assert len(rendered.encode()) <= MAX_BOOTSTRAP_BYTES[provider]
