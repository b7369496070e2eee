"""spotgpu for the Hugging Face ``Trainer`` (``pip install 'spotgpu[hf]'``; Accelerate runs inside it)::

    spot = SpotgpuCallback("s3://bucket/job", every_seconds=interval)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[spot])
    trainer.train(resume_from_checkpoint=spot.resume_from(args.output_dir))
    spot.exit()  # exit_code at once: 75 after a gang stop, else 0

The Trainer writes its own ``checkpoint-N`` directory (weights, optimizer, scheduler, RNG
per process, ``trainer_state.json``) whenever the callback sets ``control.should_save``;
``on_save`` then stores that directory's files in a spotgpu generation, and deletes the local
``checkpoint-N`` directories beyond the newest ``keep`` (or the Trainer's ``save_total_limit``
when set): the store holds every committed one. A notice to any
rank stops every rank at one step (``spotgpu.gang.Gang``): the callback sets
``should_save`` and ``should_training_stop`` and the gang commits one final generation.
``resume_from`` materialises the newest generation that verifies on every rank and hands
its path to the Trainer's own ``resume_from_checkpoint``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from spotgpu.integrations._base import SpotgpuCallbackCore
from spotgpu.integrations._generations import files_under, pack_files, prune_local_checkpoints

CHECKPOINT_DIR = "checkpoint-{step}"  # transformers.trainer_utils.PREFIX_CHECKPOINT_DIR + "-N"
_RNG_FILE = re.compile(r"^rng_state(?:_(\d+))?\.pth$")
_CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")


def own_files(relpaths: list[str], rank: int, world_size: int) -> list[str]:
    """The files of a Trainer checkpoint this rank stores: its own RNG file everywhere, every
    other file on rank 0 only (the main process writes them; other ranks' RNG files may sit
    in the same directory when the ranks share a disk, and are theirs to store)."""
    own: list[str] = []
    for rel in relpaths:
        match = _RNG_FILE.match(os.path.basename(rel))
        if match is not None:
            index = int(match.group(1)) if match.group(1) is not None else 0
            if index == rank:
                own.append(rel)
        elif rank == 0:
            own.append(rel)
    return own


class SpotgpuCallback(SpotgpuCallbackCore, TrainerCallback):  # type: ignore[misc]
    __doc__ = SpotgpuCallbackCore.__doc__

    def __init__(self, url: str, **options: Any) -> None:
        SpotgpuCallbackCore.__init__(self, url, **options)
        self._pending: str | None = None

    def resume_from(self, output_dir: str) -> str | None:
        """The local ``checkpoint-N`` directory of the newest verified generation, for
        ``trainer.train(resume_from_checkpoint=...)``; None on a fresh start. Every rank
        calls it after the Trainer exists (its arguments set up the process group)."""
        restored = self._restore()
        if restored is None:
            return None
        path = os.path.join(output_dir, CHECKPOINT_DIR.format(step=restored.step))
        restored.materialise(path)
        return path

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._start(state.global_step)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._training_ended()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        kind = self._decide(state.global_step)
        if kind is not None:
            self._pending = kind
            control.should_save = True  # the Trainer writes checkpoint-N, then calls on_save
        if kind == "final":
            control.should_training_stop = True
        return control

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        checkpoints = self._setup()
        directory = os.path.join(str(args.output_dir), CHECKPOINT_DIR.format(step=state.global_step))
        manager = checkpoints.manager
        files = own_files(files_under(directory), manager.rank, manager.world_size)
        kind, self._pending = self._pending or "periodic", None
        self._commit(kind, state.global_step, pack_files(directory, files))
        # The store keeps `keep` generations; the disk keeps as many local checkpoint-N (or the
        # Trainer's own save_total_limit), never one per save (a real LLM job fills the disk).
        prune_local_checkpoints(args.output_dir, _CHECKPOINT_NAME, args.save_total_limit or self._keep)
