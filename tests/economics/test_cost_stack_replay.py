"""Issue 35 leftover: ``spotgpu cost --stack S --pool P`` shows the preview's model-vs-replay check.

A platform engineer looks at one pool's economics with ``cost --stack`` and must read the same replay
check and the same verdict the preview prints, from the same code, in the table and in ``--json``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from test_pool_economics import REPO, _cli, _project
from test_verdict_vs_replay import _typed_rate


def _preview_pools(project: Path, stack: str) -> dict[str, Any]:
    done = _cli("preview", "--program", str(project), "--stack", stack, "--no-policy", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)["economics"]["pools"])


def test_cost_stack_prints_the_replay_check_the_preview_prints() -> None:
    """Defect: `cost --stack prod --pool train-aws` printed the model alone; the replay ran only in the preview."""
    done = _cli("cost", "--stack", "prod", "--pool", "train-aws")
    assert done.returncode == 0, done.stderr
    preview = _cli("preview", "--stack", "prod", "--no-policy").stdout
    line = next(x for x in preview.splitlines() if x.strip().startswith("replay: "))
    assert line.startswith("      replay: agrees within 15%: replay $") and line in done.stdout.splitlines()
    took = re.search(r"^      replay took (\d+\.\d+) s \(120 jobs; --no-replay skips it\)$", done.stdout, re.M)
    assert took and 0 < float(took.group(1)) < 60, done.stdout


def test_cost_stack_json_is_the_preview_pool_document_replay_included(tmp_path: Path) -> None:
    """The same verdict from the same code: a pool whose typed rate the traces contradict is DISPUTED in both,
    and `cost --stack --json` is the preview's pool document byte for byte (no timing in it)."""
    project = _project(tmp_path, "typed", _typed_rate)
    pools = _preview_pools(project, "typed")
    for name in ("train-aws", "train-gcp"):
        done = _cli("cost", "--stack", "typed", "--program", str(project), "--pool", name, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == pools[name]
    aws = pools["train-aws"]["replay"]
    assert aws["status"] == "disputed" and aws["drivers"][0]["key"] == "interruptionsPerHour"
    assert pools["train-gcp"]["replay"]["status"] == "model only"
    text = _cli("cost", "--stack", "typed", "--program", str(project), "--pool", "train-aws").stdout
    assert f"      replay: {aws['line']}" in text.splitlines()


def test_each_replay_figure_says_where_it_came_from() -> None:
    doc = json.loads(_cli("cost", "--stack", "prod", "--pool", "train-aws", "--json").stdout)
    replay = doc["replay"]
    figures = replay["figures"]
    assert figures["modelSpotUsd"] == {"value": doc["spotTotalUsd"], "kind": "model",
                                       "from": "the cost model: effectiveCost.spotTotal"}  # fmt: skip
    spot, od = figures["replaySpotUsd"], figures["replayOnDemandUsd"]
    assert spot["value"] == replay["replaySpotUsd"] and od["value"] == replay["replayOnDemandUsd"]
    assert spot["kind"] == od["kind"] == "replayed"
    assert spot["from"].startswith("ladder training-aws through the twin, mean of 120 jobs on 1-node/aws-02-15-2023 (")
    assert "one start every 24 h in each pool zone" in spot["from"]
    assert od["from"].startswith("on-demand only, mean of 120 jobs on 1-node/aws-02-15-2023 (")
    no_traces = json.loads(_cli("cost", "--stack", "prod", "--pool", "train-gcp", "--json").stdout)["replay"]
    assert no_traces["status"] == "model only" and set(no_traces["figures"]) == {"modelSpotUsd"}


def test_no_replay_skips_it_and_says_so() -> None:
    done = _cli("cost", "--stack", "prod", "--pool", "train-aws", "--no-replay", "--json")
    assert done.returncode == 0, done.stderr
    replay = json.loads(done.stdout)["replay"]
    assert replay["status"] == "not run" and "replaySpotUsd" not in replay
    text = _cli("cost", "--stack", "prod", "--pool", "train-aws", "--no-replay").stdout
    assert "      replay: not run (--no-replay): the model alone" in text.splitlines() and "replay took" not in text
    bad = _cli("cost", "--profile", "tests/economics/data/llm-finetune.yaml", "--no-replay")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--no-replay" in bad.stderr, bad.stderr
    assert "--stack" in bad.stderr


def test_the_documented_cost_stack_example_runs_as_written() -> None:
    from doc_blocks import block_after

    marker = "<!-- tested: tests/economics/test_cost_stack_replay.py runs this block exactly as written -->"
    command = block_after("economics.md", marker, "bash").strip()
    done = _cli(*shlex.split(command)[1:])
    assert done.returncode == 0, done.stderr
    printed = block_after("economics.md", marker, "text")
    lines = printed.strip("\n").splitlines()
    assert len(lines) >= 3 and any(x.strip().startswith("replay: agrees") for x in lines)
    for line in lines:
        if "replay took" in line:  # the time is this machine's: the line's shape is what is documented
            assert re.search(r"^      replay took \d+\.\d+ s \(120 jobs; --no-replay skips it\)$", done.stdout, re.M)
        else:
            assert line in done.stdout.splitlines(), line
    assert REPO.joinpath("docs/economics.md").read_text().count(marker) == 1
