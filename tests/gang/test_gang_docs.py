"""docs/agent.md "Multi-node jobs": the example loop, run exactly as written on two ranks with
one real agent (and one fake GCP metadata server) per node: a notice on node 1 stops both
ranks at one step with one committed final checkpoint; a replacement gang resumes from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from gang_testkit import Cluster, wait_until

from spotgpu.gang import EXIT_GANG_STOP
from tests.doc_blocks import block_after

MARKER = "<!-- tested: tests/gang/test_gang_docs.py"


@pytest.mark.timeout(150)
def test_the_documented_gang_loop_stops_together_and_resumes(cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(block_after("agent.md", MARKER))
    env = {"GANG_SCRIPT": script, "CKPT_URL": f"file://{tmp_path / 'ckpt'}"}

    nodes = cluster.add_nodes(["gcp", "gcp"])
    first = cluster.launch("first", 2, [n.address for n in nodes], **env)
    wait_until(lambda: all(n.agent.state.restored for n in nodes), timeout=60)  # both ranks are in the loop
    nodes[1].notice()
    assert cluster.finish(first) == [EXIT_GANG_STOP] * 2, cluster.stderr("first")
    wait_until(lambda: nodes[1].agent.state.phase == "drained")
    final = nodes[1].agent.state.final_report
    assert final is not None and final.committed and final.step is not None
    peer = nodes[0].agent.state.gang
    assert peer is not None and (peer.role, peer.committed, peer.step) == ("peer", True, final.step)
    assert nodes[0].agent.state.phase == "running"

    replacements = cluster.add_nodes(["gcp", "gcp"])
    second = cluster.launch("second", 2, [n.address for n in replacements], **env)
    restored = [wait_until(lambda n=n: n.agent.state.restored, timeout=60) for n in replacements]  # type: ignore[misc]
    assert [r.step for r in restored] == [final.step, final.step]
    replacements[0].notice()
    assert cluster.finish(second) == [EXIT_GANG_STOP] * 2, cluster.stderr("second")
