"""The pure parts of the integrations, tested without a framework run: the save schedule, the
files each rank stores, the store round trip (newest verified generation wins), the interval
read from the agent config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotgpu.checkpoint import CheckpointManager
from spotgpu.integrations._generations import FrameworkCheckpoints, files_under, pack_files
from spotgpu.integrations.schedule import SaveSchedule, pool_interval_seconds, steps_for


def test_every_steps_saves_on_multiples_even_after_a_resume() -> None:
    schedule = SaveSchedule(every_steps=4)
    schedule.start(7)  # resumed after step 7
    due = []
    for step in range(8, 20):
        if schedule.due(step):
            due.append(step)
            schedule.replan(step, 0.0)
    assert due == [8, 12, 16]


def test_every_seconds_probes_then_replans_from_the_agreed_step_time() -> None:
    schedule = SaveSchedule(every_seconds=10.0, probe_steps=5)
    schedule.start(0)
    assert not schedule.due(5) and schedule.needs_timing(5) and not schedule.needs_timing(4)
    assert schedule.replan(5, 0.5) == 25  # 10 s / 0.5 s per step
    assert not schedule.due(24) and schedule.due(25) and schedule.needs_timing(25)
    assert schedule.replan(25, 4.0) == 27  # slower steps: sooner, in steps
    assert steps_for(10.0, 30.0) == 1 and steps_for(10.0, 0.0) == 1


@pytest.mark.parametrize(
    "kwargs", [{}, {"every_steps": 4, "every_seconds": 9.0}, {"every_steps": 0}, {"every_seconds": -1.0}]
)
def test_schedule_refuses_bad_intervals_naming_the_field(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="every_s"):
        SaveSchedule(**kwargs)  # type: ignore[arg-type]


def test_each_rank_stores_its_own_rng_file_and_rank0_the_rest() -> None:
    from spotgpu.integrations.hf import own_files

    shared = ["config.json", "model.safetensors", "optimizer.pt", "trainer_state.json"]
    files = [*shared, "rng_state_0.pth", "rng_state_1.pth"]
    assert own_files(files, 0, 2) == [*shared, "rng_state_0.pth"]
    assert own_files(files, 1, 2) == ["rng_state_1.pth"]
    assert own_files([*shared, "rng_state.pth"], 0, 1) == [*shared, "rng_state.pth"]


def _write_checkpoint(directory: Path, marker: bytes) -> None:
    (directory / "sub").mkdir(parents=True)
    (directory / "model.bin").write_bytes(marker * 1000)
    (directory / "sub" / "state.json").write_bytes(b'{"step": 1}')
    (directory / "empty").write_bytes(b"")


def test_newest_verified_generation_wins_and_is_materialised_byte_for_byte(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    checkpoints = FrameworkCheckpoints(CheckpointManager(url))
    for step, marker in ((3, b"a"), (6, b"b")):
        _write_checkpoint(tmp_path / f"ck{step}", marker)
        checkpoints.save(step, pack_files(tmp_path / f"ck{step}", files_under(tmp_path / f"ck{step}")))
    assert checkpoints.last_save_seconds is not None
    # Flip one byte of the newest generation's weights: restore must fall back to step 3.
    from spotgpu.checkpoint.manifest import decode_part

    part = decode_part(next((tmp_path / "store").glob("shards/*/000000000006-*/part-r00000.json")).read_bytes())
    weights = next(i for i in part.items if i.key.endswith("model.bin"))
    shard = tmp_path / "store" / weights.path
    data = bytearray(shard.read_bytes())
    data[weights.offset + 10] ^= 1
    shard.write_bytes(bytes(data))
    restored = FrameworkCheckpoints(CheckpointManager(url)).restore()
    assert restored is not None and restored.step == 3
    out = restored.materialise(tmp_path / "restored")
    assert files_under(out) == files_under(tmp_path / "ck3")
    for rel in files_under(out):
        assert (out / rel).read_bytes() == (tmp_path / "ck3" / rel).read_bytes()
    assert FrameworkCheckpoints(CheckpointManager(url)).restore(max_step=2) is None


def test_pool_interval_comes_from_the_agent_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "agent.json"
    body = {"provider": "aws", "pool": "p", "notice": {"provider": "aws"}, "checkpointStore": "file:///x",
            "checkpointIntervalSeconds": 840}
    config.write_text(json.dumps(body))
    monkeypatch.setenv("SPOTGPU_AGENT_CONFIG", str(config))
    assert pool_interval_seconds() == 840
    config.write_text(json.dumps({**body, "checkpointIntervalSeconds": 0}))
    with pytest.raises(ValueError, match=r"agent.json: checkpointIntervalSeconds: .*fix"):
        pool_interval_seconds()
    with pytest.raises(ValueError, match=r"missing.json: cannot read the agent config .*fix: run on a pool VM"):
        pool_interval_seconds(str(tmp_path / "missing.json"))
