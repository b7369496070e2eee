"""Snapshot of a controller job's resources in a preview, shared by the three clouds' tests.

Accept an intended change with ``SPOTGPU_UPDATE_SNAPSHOTS=1 pytest tests/<cloud>/test_*controller_job.py``
and review the diff of ``tests/<cloud>/snapshots/controller_job.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import children_of


def check_snapshot(resources: list[RecordedResource], job_type: str, snapshot: Path) -> None:
    job = next(r for r in resources if r.type == job_type)
    children = sorted(children_of(resources, job), key=lambda r: r.name)
    shot = {r.name: {"type": r.type, "inputs": r.inputs} for r in children}
    text = json.dumps(shot, indent=1, sort_keys=True, default=str) + "\n"
    if os.environ.get("SPOTGPU_UPDATE_SNAPSHOTS") == "1":
        snapshot.parent.mkdir(exist_ok=True)
        snapshot.write_text(text)
    elif not snapshot.exists():  # a missing snapshot fails: writing it here would make the test unfailable
        raise AssertionError(f"no snapshot {snapshot}; create it with SPOTGPU_UPDATE_SNAPSHOTS=1 and review it")
    assert text == snapshot.read_text(), f"{job_type} changed; review it and update {snapshot}"
