"""Spot availability traces (the skypilot-org/spot-traces format).

``{"metadata": {"gap_seconds": G}, "data": [n0, n1, ...]}``: ``data[i]`` is how
many spot instances could be held at ``i * G`` seconds. Used by the cost model,
the simulator, the controller's tests and the benchmarks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The traces ship inside the package (spotgpu/data/traces/README.md: source, citation, terms), so a
#: plain clone, an installed wheel, the tests and ``spotgpu simulate`` all have them.
PACKAGED_TRACES = Path(__file__).resolve().parent / "data" / "traces" / "availability"


@dataclass(frozen=True)
class Trace:
    name: str  # e.g. "us-east-2a_v100_1"
    zone: str  # e.g. "us-east-2a"
    group: str  # e.g. "1-node/aws-02-15-2023"
    gap_seconds: int
    data: np.ndarray  # int16 counts per tick

    @property
    def duration_seconds(self) -> int:
        return int(len(self.data) * self.gap_seconds)

    @property
    def available(self) -> np.ndarray:
        """Boolean availability for one node."""
        return self.data > 0

    def mean_availability(self) -> float:
        return float(self.available.mean()) if len(self.data) else 0.0


def load_trace(path: Path) -> Trace:
    doc = json.loads(path.read_text())
    try:
        gap = int(doc["metadata"]["gap_seconds"])
        data = np.asarray(doc["data"], dtype=np.int16)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: not a spot trace ({err}); expected metadata.gap_seconds and data") from None
    if gap <= 0:
        raise ValueError(f"{path}: metadata.gap_seconds {gap} must be positive")
    return Trace(
        name=path.stem,
        zone=path.stem.split("_")[0],
        group=f"{path.parent.parent.name}/{path.parent.name}",
        gap_seconds=gap,
        data=data,
    )


def traces_root() -> Path:
    """``$SPOTGPU_TRACES`` (a folder of ``<nodes>/<set>/*.json``) or the traces packaged with spotgpu."""
    env = os.environ.get("SPOTGPU_TRACES")
    return Path(env) if env else PACKAGED_TRACES


def load_group(group: str, root: Path | None = None) -> list[Trace]:
    """All traces of one group, e.g. ``"1-node/aws-02-15-2023"``, sorted by zone."""
    base = (root or traces_root()) / group
    files = sorted(base.glob("*.json"))
    if not files:
        raise FileNotFoundError(
            f"no traces under {base}; fix: name a group from {all_groups(root)} or set SPOTGPU_TRACES to a folder of"
            " <nodes>/<set>/*.json traces"
        )
    return [load_trace(f) for f in files]


def trace_cloud(group: str) -> str:
    """The cloud a trace group was recorded on: its set's name up to the first ``-`` (``aws-02-15-2023``)."""
    return group.split("/")[-1].split("-")[0]


def all_groups(root: Path | None = None) -> list[str]:
    base = root or traces_root()
    return sorted(f"{p.parent.name}/{p.name}" for p in base.glob("*/*") if p.is_dir())
