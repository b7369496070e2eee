"""The callbacks with a node-local tier, in one process: which manager they build, where a save lands,
where a restore reads from (docs/integrations.md, "With checkpoint tiers").

Defect (audit of docs/checkpoints.md): the callbacks always built a plain ``CheckpointManager`` and
restored by reading ``manager.store``, so on a pool with ``checkpointTiers`` every save went to the
store and no restore ever read the node's tier or a peer's copy, while the preview priced the pool
as tiered.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spotgpu.checkpoint import CheckpointManager
from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager
from spotgpu.integrations._base import SpotgpuCallbackCore, resolve_tier
from spotgpu.integrations._generations import FrameworkCheckpoints, files_under, pack_files
from spotgpu.models.tiers import LOCAL_DIR_ENV, ZONE_ENV


@pytest.fixture
def vm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pool VM's environment: its tier at ``local/``, an agent config whose durable interval is two
    checkpoint intervals (the store gets every 2nd save), no agent running."""
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"checkpointIntervalSeconds": 600, "localTier": {
        "path": "/var/lib/spotgpu/local", "keep": 2, "peerCopies": 1, "durableIntervalSeconds": 1200, "ramDiskGiB": 1}}))  # fmt: skip
    monkeypatch.setenv("SPOTGPU_AGENT_CONFIG", str(config))
    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path / "local"))
    monkeypatch.setenv(ZONE_ENV, "zone-a")
    monkeypatch.setenv("SPOTGPU_AGENT", str(tmp_path / "no-agent.sock"))
    return tmp_path


def test_tier_auto_is_the_vms_tier_off_and_none_are_the_store(vm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_tier("auto") == LocalTier(vm / "local", keep=2, peer_copies=1, durable_every=2, zone="zone-a")
    assert resolve_tier("off") is None and resolve_tier(None) is None
    own = LocalTier(vm / "elsewhere")
    assert resolve_tier(own) is own
    with pytest.raises(ValueError, match=r"^tier: 'on' is not a tier choice; fix: 'auto'"):
        resolve_tier("on")
    monkeypatch.delenv(LOCAL_DIR_ENV)
    monkeypatch.setenv("SPOTGPU_AGENT_CONFIG", str(vm / "missing.json"))
    assert resolve_tier("auto") is None  # a VM without a tier: exactly as before


def test_the_callback_builds_a_tiered_manager_on_a_vm_with_a_tier(vm: Path) -> None:
    url = (vm / "store").as_uri()
    tiered = SpotgpuCallbackCore(url, every_steps=4)._setup().manager
    assert isinstance(tiered, TieredCheckpointManager) and tiered.tier is not None
    assert tiered.tier.durable_every == 2
    plain = SpotgpuCallbackCore(url, every_steps=4, tier="off")._setup().manager
    assert type(plain) is CheckpointManager


def _framework_checkpoint(directory: Path, step: int) -> Path:
    (directory / "sub").mkdir(parents=True)
    (directory / "model.bin").write_bytes(bytes([step]) * 100_000)
    (directory / "sub" / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (directory / "empty").write_bytes(b"")
    return directory


def test_saves_land_in_the_tier_the_store_gets_every_second_and_restore_reads_the_nearest(vm: Path) -> None:
    url = (vm / "store").as_uri()
    checkpoints = SpotgpuCallbackCore(url, every_steps=3, keep=5)._setup()
    for step in (3, 6, 9):
        directory = _framework_checkpoint(vm / f"ck{step}", step)
        checkpoints.save(step, pack_files(directory, files_under(directory)))
    checkpoints.close()  # the queued upload finishes
    assert [i.step for i in CheckpointManager(url).list() if i.committed] == [6]  # every 2nd save, in the background

    restored = SpotgpuCallbackCore(url, every_steps=3)._setup().restore()
    assert restored is not None and (restored.step, restored.source) == (9, "local")
    out = restored.materialise(vm / "restored")
    assert files_under(out) == files_under(vm / "ck9")
    assert all((out / rel).read_bytes() == (vm / "ck9" / rel).read_bytes() for rel in files_under(out))

    shutil.rmtree(vm / "local")  # a replacement VM: its tier starts empty, and no peer holds a copy
    restored = SpotgpuCallbackCore(url, every_steps=3)._setup().restore()
    assert restored is not None and (restored.step, restored.source) == (6, "store")
    out = restored.materialise(vm / "restored-store")
    assert all((out / rel).read_bytes() == (vm / "ck6" / rel).read_bytes() for rel in files_under(vm / "ck6"))


def test_a_generation_of_another_world_size_is_read_from_the_store_part_by_part(vm: Path) -> None:
    """The tier restores only its own world size; a resized job still resumes from the store."""
    url = (vm / "store").as_uri()
    ranks = [FrameworkCheckpoints(CheckpointManager(url, rank=r, world_size=2, session="two")) for r in range(2)]
    directory = _framework_checkpoint(vm / "ck5", 5)
    import threading

    threads = [threading.Thread(target=c.save, args=(5, pack_files(directory, files_under(directory) if c.manager.rank == 0 else [])))
               for c in ranks]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    restored = SpotgpuCallbackCore(url, every_steps=3)._setup().restore()
    assert restored is not None and (restored.step, restored.source) == (5, "store")
    assert sorted(restored.files) == files_under(directory)


def test_a_periodic_save_returns_after_the_host_copy_and_never_reads_the_directory_again(vm: Path) -> None:
    """Defect: the callbacks' periodic saves used the tier's ``save``, so training waited for the local write
    and the peer copies. Now the callback returns while the local write is held, the framework may rewrite
    and delete its files at once, and what commits is what the files held when the callback returned."""
    import threading
    import time

    url = (vm / "store").as_uri()
    core = SpotgpuCallbackCore(url, every_steps=3)
    checkpoints = core._setup()
    manager = checkpoints.manager
    assert isinstance(manager, TieredCheckpointManager)
    gate, writing = threading.Event(), threading.Event()
    local_save = manager._local._save

    def held_write(*args: object, **kwargs: object) -> object:  # the node tier's local write, slowed
        writing.set()
        assert gate.wait(60)
        return local_save(*args, **kwargs)  # type: ignore[arg-type]

    manager._local._save = held_write  # type: ignore[method-assign]
    directory = _framework_checkpoint(vm / "ck3", 3)
    written = {rel: (directory / rel).read_bytes() for rel in files_under(directory)}
    returned, result = threading.Event(), []
    started = time.monotonic()

    def periodic() -> None:
        result.append(core._commit("periodic", 3, pack_files(directory, files_under(directory))))
        returned.set()

    thread = threading.Thread(target=periodic)
    thread.start()
    try:
        assert returned.wait(30), "the periodic save waited for the local write"
        returned_after = time.monotonic() - started
        assert writing.wait(30) and not result[0].done()  # the local write is held: nothing committed yet
        with open(directory / "model.bin", "r+b") as handle:  # the framework overwrites it in place, then deletes it
            handle.write(b"\xff" * 100_000)
        shutil.rmtree(directory)
        time.sleep(0.5)  # the commit takes at least this long
        held_for = time.monotonic() - started - returned_after
    finally:
        gate.set()
        thread.join(60)
    result[0].wait(60)
    blocked, commit = checkpoints.last_blocked_seconds, checkpoints.last_save_seconds
    assert blocked is not None and commit is not None
    assert blocked <= returned_after and commit >= held_for > blocked  # what training waited vs the whole commit
    checkpoints.close()

    restored = SpotgpuCallbackCore(url, every_steps=3)._setup().restore()
    assert restored is not None and (restored.step, restored.source) == (3, "local")
    out = restored.materialise(vm / "restored")
    assert {rel: (out / rel).read_bytes() for rel in files_under(out)} == written


def test_an_early_checkpoint_waits_for_the_periodic_save_in_flight(vm: Path) -> None:
    """Saves commit in step order: the early checkpoint a rebalance notice asks for returns committed, after
    the periodic save before it; training ends with nothing in flight (``exit()`` closes the manager)."""
    import threading

    url = (vm / "store").as_uri()
    core = SpotgpuCallbackCore(url, every_steps=3)
    checkpoints = core._setup()
    assert core.gang is not None
    core.gang.client = None  # no agent to report the early checkpoint to
    manager = checkpoints.manager
    assert isinstance(manager, TieredCheckpointManager)
    gate = threading.Event()
    commit_local = manager._commit_local
    order: list[str] = []

    def held(step: int, *args: object) -> object:
        if step == 3:
            assert gate.wait(60)
        try:
            return commit_local(step, *args)  # type: ignore[arg-type]
        finally:
            order.append(f"committed {step}")

    manager._commit_local = held  # type: ignore[method-assign]
    for step, kind in ((3, "periodic"), (4, "early")):
        directory = _framework_checkpoint(vm / f"ck{step}", step)
        state = pack_files(directory, files_under(directory))
        if kind == "periodic":
            handle = core._commit(kind, step, state)
            order.append("periodic returned")
        else:
            early = threading.Thread(target=lambda s=state: order.append(f"early {core._commit('early', 4, s).step}"))
            early.start()
            early.join(1.0)
            assert early.is_alive()  # held behind the save in flight
            gate.set()
            early.join(60)
    assert order == ["periodic returned", "committed 3", "committed 4", "early 4"]
    assert handle.done() and handle.error is None
    core._training_ended()
    assert [m.step for m in manager.node.markers()] == [4, 3]
