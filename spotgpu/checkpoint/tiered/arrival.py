"""Verifying a peer copy while it streams in: every block checked in the pass that receives it.

A copy of a rank's generation arrives as files in the order the sender lists them
(:meth:`.node.NodeTier.generation_files`: the small JSON documents first, then the shard data,
the commit marker last). :class:`ArrivalCheck` is the transport's observer for one source: it keeps
the documents in memory, and feeds every chunk of a shard object to a
:class:`~spotgpu.checkpoint.shard.ShardCheck` built from the part that arrived before it, so a
corrupted block is caught the moment its last byte lands (the rest of that copy is not even
written to disk). What the receiver used to do after the transfer, read the whole copy back and
hash it again, is gone: :meth:`ArrivalCheck.verify` checks the marker and the parts (bytes, not
data) and that each shard checked on arrival is the one on disk, with its size.

The part used for a shard's check must be the one the marker vouches for: the marker arrives
last, so :meth:`verify` compares the part's bytes held in memory with the marker's hash of it.
A shard that arrived before its part (not a layout the tier writes) is read back and hashed as before.
"""

from __future__ import annotations

import time
from pathlib import Path

from spotgpu.checkpoint import layout, reader
from spotgpu.checkpoint.errors import CheckpointError, VerificationError
from spotgpu.checkpoint.hashing import digest
from spotgpu.checkpoint.manifest import RankPart, decode_commit, decode_part
from spotgpu.checkpoint.reader import VerifyReport
from spotgpu.checkpoint.shard import ShardCheck
from spotgpu.storage.store import open_store

#: Files up to this size (a generation's JSON documents) are kept in memory as they arrive.
DOC_BYTES = 16 << 20
SHARD_SUFFIX = ".shard"


class ArrivalCheck:
    """Observes one source's stream (:meth:`begin`, :meth:`update`, :meth:`end` per file), then :meth:`verify`."""

    def __init__(self, step: int, generation: str) -> None:
        self.step, self.generation = step, generation
        #: the first thing wrong with the copy (the transport stops writing it to disk once set)
        self.problem: str | None = None
        #: shard path -> bytes checked on arrival
        self.checked: dict[str, int] = {}
        #: seconds spent checking blocks as they arrived (inside the transfer's time)
        self.seconds = 0.0
        self.docs: dict[str, bytes] = {}
        #: shard path -> the part path whose index checked it
        self._checked_by: dict[str, str] = {}
        self._path = ""
        self._doc: bytearray | None = None
        self._shard: ShardCheck | None = None
        self._shard_part = ""

    @property
    def failed(self) -> bool:
        return self.problem is not None

    def begin(self, path: str, size: int) -> None:
        self._path, self._doc, self._shard = path, None, None
        if self.failed:
            return
        if path.endswith(SHARD_SUFFIX):
            found = self._part_of(path)
            if found is None:
                return  # read back after the transfer
            part_path, part = found
            ref = next(s for s in part.shards if s.path == path)
            if ref.size != size:
                self.problem = f"{path}: {size} bytes sent, its part says {ref.size}"
                return
            self._shard, self._shard_part = ShardCheck(part.hash_algorithm, path, size, part.items), part_path
        elif size <= DOC_BYTES:
            self._doc = bytearray()

    def update(self, data: memoryview) -> None:
        if self._shard is not None:
            started = time.perf_counter()
            self._shard.update(data)
            self.seconds += time.perf_counter() - started
            if self._shard.problem is not None:
                self.problem = self._shard.problem
                self._shard = None
        elif self._doc is not None:
            self._doc += data

    def end(self) -> None:
        if self._shard is not None:
            try:
                self._shard.finish()
            except VerificationError as err:
                self.problem = str(err)
            else:
                self.checked[self._path] = self._shard.size
                self._checked_by[self._path] = self._shard_part
        elif self._doc is not None:
            self.docs[self._path] = bytes(self._doc)
        self._shard, self._doc = None, None

    def _part_of(self, shard: str) -> tuple[str, RankPart] | None:
        for path, body in self.docs.items():
            if not path.rsplit("/", 1)[-1].startswith("part-"):
                continue
            try:
                part = decode_part(body, path)
            except (CheckpointError, ValueError):
                continue
            if any(s.path == shard for s in part.shards):
                return path, part
        return None

    def verify(self, staged: Path) -> VerifyReport:
        """The copy in ``staged`` is ``generation``, whole: its shards checked on arrival, by the parts its
        marker vouches for; the marker and parts read from disk as a store's ``verify`` reads them."""
        if self.problem is not None:
            return VerifyReport(self.generation, self.step, False, [f"on arrival: {self.problem}"])
        marker = self.docs.get(layout.commit_path(self.step))
        problems: list[str] = []
        try:
            record = decode_commit(marker or b"", layout.commit_path(self.step))
            refs = {ref.path: ref for ref in record.parts}
            for shard, part_path in self._checked_by.items():
                ref = refs.get(part_path)
                if ref is None or digest(record.hash_algorithm, self.docs[part_path]) != ref.hash:
                    problems.append(f"{shard} was checked against {part_path}, which the commit marker does not vouch for")
        except (CheckpointError, ValueError) as err:
            problems.append(f"commit marker: {err}")
        if problems:
            return VerifyReport(self.generation, self.step, False, problems)
        report = reader.verify_step(open_store(staged.as_uri()), self.step, self.checked)
        if report.ok and report.generation != self.generation:
            report.ok = False
            report.problems.append(f"the copy is {report.generation}, not {self.generation}")
        return report
