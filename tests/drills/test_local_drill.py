"""``spotgpu drill local`` on the shipped example job, against uninterrupted references.

Each drill is real: one fake metadata server, one ``spotgpu agent run`` and one
``spotgpu gang run -- torchrun`` per node, gloo ranks, a notice, a replacement node. The
resumed run's per-step losses and final parameters must equal an uninterrupted run bit for
bit. The references run the same job under one ``torchrun --standalone`` with one process
per rank (gloo's reduction depends on the ranks, not on how they are spread over hosts).
Everything has hard timeouts; the drill kills what it started by PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spotgpu.drills.local import LocalDrill, run_drill

STEPS = 30
REPO = Path(__file__).resolve().parents[2]
JOB = ["-m", "spotgpu.drills.gang_job", "--steps", str(STEPS), "--save-every", "5", "--step-seconds", "0.02"]


def job(tmp: Path, *extra: str) -> list[str]:
    return [*JOB, "--ckpt", f"file://{tmp / 'ckpt'}", "--out", str(tmp / "out"), *extra]


def losses(out: Path) -> dict[int, dict[int, str]]:
    """rank -> step -> loss (hex); a re-trained step's last line wins."""
    by_rank: dict[int, dict[int, str]] = {}
    for path in sorted(out.glob("losses-r*.jsonl")):
        rank = int(path.stem.removeprefix("losses-r"))
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            by_rank.setdefault(rank, {})[record["step"]] = record["loss"]
    return by_rank


def outcome(out: Path) -> tuple[dict[int, dict[int, str]], dict[str, Any]]:
    return losses(out), json.loads((out / "final.json").read_text(encoding="utf-8"))


def reference(tmp: Path, ranks: int, *extra: str) -> tuple[dict[int, dict[int, str]], dict[str, Any]]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", *job(tmp, *extra)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**_env(), "SPOTGPU_AGENT": "127.0.0.1:9"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return outcome(tmp / "out")


def _env() -> dict[str, str]:
    return dict(os.environ)


@pytest.fixture(scope="module")
def reference2(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, dict[int, str]], dict[str, Any]]:
    return reference(tmp_path_factory.mktemp("ref2"), 2, "--state-mb", "4")


def drill(tmp: Path, nodes: int, notice: int, provider: str, *extra: str, during_save: bool = False,
          **spec_extra: Any) -> dict[str, Any]:  # fmt: skip
    spec = LocalDrill(
        command=job(tmp, *extra),
        nodes=nodes,
        notice_node=notice,
        provider=provider,
        lead_seconds=None if provider == "gcp" else 60.0,
        during_save=during_save,
        checkpoint_url=f"file://{tmp / 'ckpt'}",
        timeout_seconds=240,
        workdir=tmp / "drill",
        **spec_extra,
    )
    doc = run_drill(spec, say=lambda line: print(line, flush=True)).document()
    print(json.dumps(doc, indent=1))
    return doc


def check(doc: dict[str, Any], nodes: int, notice: int) -> None:
    assert doc["status"] == "passed", doc["reasons"]
    steps = set(doc["stopSteps"].values())
    assert len(steps) == 1 and len(doc["stopSteps"]) == nodes  # one stop, one step, every rank
    (stop,) = steps
    assert doc["finalCheckpoint"] == {"committed": True, "step": stop}
    assert set(doc["resumedSteps"].values()) == {stop}  # every rank resumed at the committed step
    assert len(doc["resumedSteps"]) == nodes and f"node{notice}" not in doc["resumedSteps"]  # the replacement, not it
    assert doc["launcherExits"] == {f"node{i}": 0 for i in range(nodes + 1)}  # the noticed one left "drained"
    assert doc["processesLeft"] == []
    roles = {name: s["role"] for name, s in doc["stops"].items()}
    assert roles.pop(f"node{notice}") == "noticed" and set(roles.values()) == {"peer"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_nodes_notice_on_node0_resume_bitwise(
    tmp_path: Path, reference2: tuple[dict[int, dict[int, str]], dict[str, Any]]
) -> None:
    doc = drill(tmp_path, 2, 0, "azure", "--state-mb", "4")
    check(doc, 2, 0)
    assert outcome(tmp_path / "out") == reference2


def run_as_written(command: str, cwd: Path, timeout: float) -> dict[str, Any]:
    """A documented ``spotgpu drill local ... --json`` command under bash; its JSON document (it must exit 0)."""
    env = {**_env(), "PATH": f"{Path(sys.executable).parent}:{_env().get('PATH', '')}"}
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the drill's own cleanup kills its nodes by PID
        out, err = proc.communicate(timeout=30)
    print(err[-4000:])
    assert proc.returncode == 0, out[-4000:]
    doc: dict[str, Any] = json.loads(out)
    return doc


def documented_drill() -> str:
    """The CI command of docs/operations.md ("Gang jobs"), exactly as written."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("### Gang jobs: drill the whole gang", 1)[1]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_documented_ci_drill_notice_on_node1_during_save_resumes_bitwise(
    tmp_path: Path, reference2: tuple[dict[int, dict[int, str]], dict[str, Any]]
) -> None:
    command = documented_drill()
    assert command.startswith("spotgpu drill local --nodes 2 --notice-node 1 --during-save")
    doc = run_as_written(command, tmp_path, 290)
    check(doc, 2, 1)
    assert outcome(tmp_path / "drill" / "out") == reference2


@pytest.fixture(scope="module")
def reference4(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, dict[int, str]], dict[str, Any]]:
    return reference(tmp_path_factory.mktemp("ref4"), 4)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_four_nodes_resume_bitwise_survivors_from_their_tier_the_replacement_from_a_peer(
    tmp_path: Path, reference4: tuple[dict[int, dict[int, str]], dict[str, Any]]
) -> None:
    doc = drill(tmp_path, 4, 2, "gcp")
    check(doc, 4, 2)
    assert outcome(tmp_path / "out") == reference4
    sources = {name: r["source"] for name, r in doc["restores"].items()}
    assert sources == {"node0": "local", "node1": "local", "node3": "local", "node4": "peer"}
    assert list(doc["phases"]) == ["stopped", "replacementJoined", "restored", "firstStep"]
    assert 0 < doc["phases"]["stopped"] < doc["phases"]["replacementJoined"] <= doc["phases"]["restored"]


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_documented_drill_a_node_and_its_peer_reclaimed_together_resume_from_the_store_bitwise(tmp_path: Path) -> None:
    """docs/operations.md ("Checkpoint tiers in the drill"), run as written. Zones a, b, a, b: node 1's shard
    is copied to node 2. Node 2 goes without notice the moment node 1's notice arrives: the gang loses a
    peer, no final checkpoint; rank 1's newest local step is gone with both nodes, so the gang restores the
    newest durable one, rank 1's replacement from the store, node 2's replacement from its shard's
    surviving copy, the survivors from their own tiers; still bit for bit."""
    from tests.doc_blocks import block_after

    command = block_after("operations.md", "<!-- tested: tests/drills/test_local_drill.py runs this command", "bash")
    assert command.startswith("spotgpu drill local --nodes 4 --notice-node 1 --also-reclaim 2 --zones 2")
    expected = reference(tmp_path / "ref", 4, *command.split("gang_job", 1)[1].split()[4:])
    doc = run_as_written(command, tmp_path, 400)
    assert doc["status"] == "passed", doc["reasons"]
    assert doc["reclaimed"] == ["node1", "node2"] and doc["processesLeft"] == []
    sources = {name: r["source"] for name, r in doc["restores"].items()}
    assert sources == {"node0": "local", "node3": "local", "node4": "peer", "node5": "store"}
    assert len({r["step"] for r in doc["restores"].values()}) == 1
    assert outcome(tmp_path / "drill" / "out") == expected
