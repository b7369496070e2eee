"""DCP checkpoints and a node-local tier: DCP does not use it, and on a VM with one the manager says so.

Defect (audit of docs/checkpoints.md): the docs said the tier worked "unchanged" under every manager,
while ``DCPCheckpointManager`` and ``GenerationWriter`` always write to the store, silently, on a pool
whose cost the preview computed as tiered.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("torch")

from spotgpu.checkpoint.dcp import DCPCheckpointManager
from spotgpu.models.tiers import LOCAL_DIR_ENV


def test_a_dcp_manager_on_a_vm_with_a_tier_says_every_save_goes_to_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SPOTGPU_AGENT_CONFIG", str(tmp_path / "no-agent-config.json"))
    monkeypatch.delenv(LOCAL_DIR_ENV, raising=False)
    with caplog.at_level(logging.WARNING, logger="spotgpu.checkpoint.dcp"):
        DCPCheckpointManager((tmp_path / "store").as_uri())
    assert not caplog.records  # no tier: nothing to say

    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path / "local"))
    with caplog.at_level(logging.WARNING, logger="spotgpu.checkpoint.dcp"):
        DCPCheckpointManager((tmp_path / "store").as_uri())
    [record] = caplog.records
    assert f"local checkpoint tier ({tmp_path / 'local'}), which DCP checkpoints do not use" in record.getMessage()
    assert "every save goes to the object store" in record.getMessage()


def test_a_tier_config_this_runtime_cannot_read_does_not_stop_a_dcp_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect (review): the manager validated the agent config's ``localTier`` only to warn that DCP does not
    use it, so a block this runtime refuses (a newer agent's, version skew) made ``DCPCheckpointManager`` raise."""
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"checkpointIntervalSeconds": 600, "localTier": {"path": "/x", "keep": -3}}))
    monkeypatch.setenv("SPOTGPU_AGENT_CONFIG", str(config))
    monkeypatch.delenv(LOCAL_DIR_ENV, raising=False)
    with caplog.at_level(logging.WARNING, logger="spotgpu.checkpoint.dcp"):
        manager = DCPCheckpointManager((tmp_path / "store").as_uri())
    assert manager.url.startswith("file://") and not caplog.records
