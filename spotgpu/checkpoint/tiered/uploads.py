"""The durable copy: every ``durable_every``-th local generation goes to the object store, in the background.

Each rank uploads its own shard of the same steps, in step order, through the store's own commit
protocol (:class:`~spotgpu.checkpoint.CheckpointManager` with the job's rank, world size and the
local generation's session: the store generation has the local one's name and bytes). The state is
the local tier's committed files, checked and mapped read-only (:mod:`.mapped`: no copy of the
state in host memory), rather than the training loop's buffers, which training goes on changing;
the upload never holds a collective, so training never waits on it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.manager import CheckpointManager
from spotgpu.checkpoint.tiered.mapped import mapped_generation
from spotgpu.checkpoint.tiered.node import NodeTier

log = logging.getLogger(__name__)


#: Ended uploads :meth:`Uploader.submit` still recognises (a final save of a step just uploaded).
KEEP_DONE = 4


@dataclass
class Upload:
    step: int
    generation: str
    shard: int
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    seconds: float = 0.0


class Uploader:
    """One thread per rank; :meth:`submit` queues a step, :meth:`wait` waits for one (the final checkpoint)."""

    def __init__(self, tier: NodeTier, store: Callable[[str], CheckpointManager]) -> None:
        self.tier = tier
        self.store = store  # session -> the store manager of this rank
        self._queue: queue.Queue[Upload | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.completed: list[Upload] = []
        self._jobs: dict[str, Upload] = {}
        self._lock = threading.Lock()

    def submit(self, step: int, generation: str, shard: int) -> Upload:
        """Queue an upload; one of the same generation queued, running or done already is returned instead
        (the final save after a periodic save of the same step)."""
        with self._lock:
            known = self._jobs.get(generation)
            if known is not None and known.error is None:
                return known
            job = self._jobs[generation] = Upload(step, generation, shard)
            done = [g for g, j in self._jobs.items() if j.done.is_set()]
            for old in done[: max(0, len(done) - KEEP_DONE)]:  # the oldest ended uploads are forgotten
                del self._jobs[old]
        self.tier.pinned.add(step)  # its local copy stays while it is read
        self._queue.put(job)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="spotgpu-ckpt-upload", daemon=True)
            self._thread.start()
        return job

    def pending(self) -> int:
        return self._queue.qsize()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            started = time.monotonic()
            session = job.generation.split("-", 1)[1]
            try:
                self._upload(job, session)
                self.tier.mark_durable(job.step, job.generation)
            except BaseException as err:  # reported to whoever waits; the next upload goes on
                job.error = err
                log.warning("upload of %s to the object store failed: %s", job.generation, err)
            finally:
                job.seconds = time.monotonic() - started
                self.tier.pinned.discard(job.step)
                self.completed.append(job)
                job.done.set()

    def _upload(self, job: Upload, session: str) -> None:
        """The local generation, checked, through the store's commit protocol."""
        local = self.tier.manager(job.shard, session)
        try:
            with mapped_generation(self.tier.shard_root(job.shard), local.store, job.step, job.generation) as state:
                if state is not None:
                    self.store(session).save(job.step, state)
                    return
        except VerificationError as err:
            raise RuntimeError(f"local generation {job.generation} did not verify for the upload: {err}") from None
        restored = local.restore(max_step=job.step)  # a legacy-format generation: read back whole
        if restored is None or restored.generation != job.generation:
            raise RuntimeError(f"local generation {job.generation} did not verify for the upload")
        self.store(session).save(job.step, restored.state)

    def close(self, timeout: float | None = None) -> None:
        """Finish what is queued (or give up after ``timeout``), then stop the thread."""
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout)
