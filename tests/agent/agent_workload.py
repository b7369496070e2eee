"""A tiny training loop wired to the agent exactly as docs/agent.md shows (run as a subprocess).

usage: agent_workload.py CHECKPOINT_URL AGENT_ADDRESS READY_FILE
Prints one JSON line with the final save result and exits 0 when it stopped on a notice.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from spotgpu.agent.client import AgentClient
from spotgpu.checkpoint import CheckpointManager


def main() -> int:
    url, address, ready_file = sys.argv[1:4]
    ckpt = CheckpointManager(url)
    restored = ckpt.restore()
    step = restored.step if restored else 0
    weights = restored.state["w"].copy() if restored else np.zeros(1 << 16, dtype=np.float32)
    agent = AgentClient(address)  # line 1
    agent.ready()
    Path(ready_file).write_text("ready")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        step += 1
        weights += 1.0  # "training"
        time.sleep(0.005)
        if step % 100 == 0:
            ckpt.save(step, {"w": weights})  # periodic checkpoints are the primary protection
        if agent.should_stop():  # line 2
            result = agent.final_checkpoint(ckpt, step, {"w": weights})  # line 3
            print(
                json.dumps(
                    {
                        "step": step,
                        "committed": result.committed,
                        "generation": result.generation,
                        "seconds": result.seconds,
                        "reason": result.reason,
                    }
                ),
                flush=True,
            )
            return 0
    return 3  # no notice arrived


if __name__ == "__main__":
    sys.exit(main())
