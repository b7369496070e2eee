"""spotgpu for ``lightning.Trainer`` (``pip install 'spotgpu[lightning]'``)::

    spot = SpotgpuCallback("s3://bucket/job", every_seconds=interval)
    trainer = L.Trainer(max_steps=1000, callbacks=[spot], enable_checkpointing=False)
    trainer.fit(model, ckpt_path=spot.resume_from("restore"))
    spot.exit()  # exit_code at once: 75 after a gang stop, else 0

At a save step every rank calls ``trainer.save_checkpoint`` (Lightning's own ``.ckpt``:
weights, optimizers, schedulers, loop progress, callback and stateful-dataloader state,
written by rank 0) into a hidden staging directory it removes once the generation is
committed (nothing is left in ``default_root_dir``), and each rank stores its part: rank 0 the ``.ckpt`` file, every rank
its own RNG state, which Lightning does not save. A notice to any rank stops every rank
at one step through ``spotgpu.gang.Gang`` and ``trainer.should_stop``. ``resume_from``
materialises the newest generation that verifies on every rank and returns the path for
``trainer.fit(ckpt_path=...)``; the RNG is put back right before the first resumed batch.

With several ranks, create the process group before ``resume_from`` (Lightning reuses it):
``torch.distributed.init_process_group("nccl", timeout=spotgpu.gang.collective_timeout(...))``.
Mid-epoch resume is exact only with a stateful dataloader: Lightning saves a loader's
``state_dict()``; :class:`ResumableDataLoader` is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from torch.utils.data import DataLoader, Dataset

from spotgpu.checkpoint.torch import ResumableSampler, decode_tree, encode_tree, rng_state, set_rng_state
from spotgpu.integrations._base import SpotgpuCallbackCore
from spotgpu.integrations._generations import EXTRA_PREFIX, STAGING_DIR, pack_files, process_group, remove_staging

CHECKPOINT_FILE = "model.ckpt"
RNG = "rng"


class SpotgpuCallback(SpotgpuCallbackCore, Callback):
    __doc__ = SpotgpuCallbackCore.__doc__

    def __init__(self, url: str, **options: Any) -> None:
        SpotgpuCallbackCore.__init__(self, url, **options)
        self._rng_to_load: Any = None

    def resume_from(self, directory: str) -> str | None:
        """The local ``.ckpt`` of the newest verified generation, for ``trainer.fit(ckpt_path=...)``;
        None on a fresh start. Every rank calls it (after creating the process group)."""
        restored = self._restore()
        if restored is None:
            return None
        root = restored.materialise(Path(directory) / f"step-{restored.step}")
        if RNG + "/tree" in restored.extras:
            self._rng_to_load = decode_tree(RNG, restored.extras)
        return str(root / CHECKPOINT_FILE)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._start(trainer.global_step)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._training_ended()

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int) -> None:
        # After the loader's iterator drew its seed, as it had when the RNG was saved.
        if self._rng_to_load is not None:
            set_rng_state(self._rng_to_load)
            self._rng_to_load = None

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        kind = self._decide(step)
        if kind is None:
            return
        checkpoints = self._setup()
        staging = Path(trainer.default_root_dir) / STAGING_DIR
        directory = staging / f"step-{step}"
        trainer.save_checkpoint(directory / CHECKPOINT_FILE)  # every rank; rank 0 writes
        state = pack_files(directory, [CHECKPOINT_FILE] if checkpoints.manager.rank == 0 else [])
        state.update({EXTRA_PREFIX + key: value for key, value in encode_tree(RNG, rng_state()).items()})
        try:
            self._commit(kind, step, state)
        finally:
            remove_staging(directory)  # the store holds it now
        if kind == "final":
            trainer.should_stop = True


class _EpochKeepingSampler(ResumableSampler):
    """Lightning calls ``set_epoch`` at every epoch start, a resumed one included; keep the
    restored position when the epoch does not change."""

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            super().set_epoch(epoch)


class ResumableDataLoader(DataLoader):  # type: ignore[type-arg]
    """A shuffling ``DataLoader`` whose position Lightning saves in its checkpoint, so a
    resumed epoch sees exactly the remaining batches. Each rank takes its share of one
    permutation (pass ``use_distributed_sampler=False`` to the Trainer). Keep
    ``num_workers=0``: workers read ahead of the position."""

    def __init__(self, dataset: Dataset[Any], *, batch_size: int, seed: int = 0, shuffle: bool = True, **kw: Any):
        rank, world = process_group()
        sampler = _EpochKeepingSampler(len(dataset), shuffle=shuffle, seed=seed, rank=rank, world_size=world)  # type: ignore[arg-type]
        super().__init__(dataset, batch_size=batch_size, sampler=sampler, **kw)
        self.resumable_sampler = sampler

    def state_dict(self) -> dict[str, int]:
        return self.resumable_sampler.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.resumable_sampler.load_state_dict(state)
