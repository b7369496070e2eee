"""Every flag is checked before any other work: one line naming the flag, the value and the fix, exit 2
(issue 31, item 8).

Defects: ``simulate --nodes 0`` was ignored; ``observability scrape-config --target nothost``,
``--target 10.0.0.1:99999`` and ``--pool "bad pool!"`` printed an invalid config with rc 0, and
without ``--pool`` the CloudWatch log group was literally ``/spotgpu/POOL/prometheus``;
``init --stack "Prod Stack"`` wrote ``Pulumi.Prod Stack.yaml``, which the preview then refused;
``drill aws --poll-seconds -1`` answered with a credentials error first; ``ckpt verify STORE 9999``
(no such step) exited 1, not 2; ``cost --notice-credit 1.5`` answered with an internal name and no fix.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spotgpu.cli import build_parser, main
from spotgpu.cliutil import EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]
PROFILE = str(REPO / "tests" / "economics" / "data" / "llm-finetune.yaml")


def leaves(parser: argparse.ArgumentParser, path: str = "spotgpu") -> list[tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(path, parser)]
    return [leaf for name, child in subs[0].choices.items() for leaf in leaves(child, f"{path} {name}")]


def test_no_flag_takes_an_unchecked_number() -> None:
    """A bare ``type=int``/``float`` accepts 0, -1 and 1.5 alike; every number flag states its range."""
    unchecked = [
        f"{path} {action.option_strings[0]}"
        for path, parser in leaves(build_parser())
        for action in parser._actions
        if action.option_strings and action.type in (int, float)
    ]
    assert unchecked == []


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "flag", "value"),
    [
        (["simulate", "--profile", PROFILE, "--nodes", "0"], "--nodes", "0"),
        (["simulate", "--profile", PROFILE, "--interval", "soon"], "--interval", "soon"),
        (["cost", "--profile", PROFILE, "--notice-credit", "1.5"], "--notice-credit", "1.5"),
        (["observability", "scrape-config", "--target", "nothost"], "--target", "nothost"),
        (["observability", "scrape-config", "--target", "10.0.0.1:99999"], "--target", "99999"),
        (["observability", "scrape-config", "--cloud", "aws", "--pool", "bad pool!"], "--pool", "bad pool!"),
        (["observability", "scrape-config", "--cloud", "aws"], "--pool", "missing"),
        (["init", "somewhere", "--owner", "t", "--stack", "Prod Stack"], "--stack", "Prod Stack"),
        (["preview", "--stack", "Prod Stack"], "--stack", "Prod Stack"),
        (["drill", "aws", "--pool", "train-aws", "--poll-seconds", "-1"], "--poll-seconds", "-1"),
        (["drill", "local", "--nodes", "0", "--", "true"], "--nodes", "0"),
        (["ckpt", "gc", "/nonexistent", "--keep", "0"], "--keep", "0"),
        (["gang", "store", "--port", "70000"], "--port", "70000"),
    ],
)
def test_a_bad_flag_is_one_line_naming_flag_value_and_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], flag: str, value: str
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing is written: init would create ./somewhere
    line = one_line(capsys, argv)
    assert f": {flag}: " in line, line
    assert value in line and "fix:" in line, line
    assert "credential" not in line.lower() and "Traceback" not in line
    assert not (tmp_path / "somewhere").exists()


def test_scrape_config_with_a_pool_names_it_in_the_log_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["observability", "scrape-config", "--cloud", "aws", "--pool", "train-aws", "--json"]) == 0
    text = capsys.readouterr().out
    assert "/spotgpu/train-aws/prometheus" in text and "POOL" not in text


def test_ckpt_verify_of_a_step_that_does_not_exist_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spotgpu.checkpoint import CheckpointManager

    CheckpointManager(tmp_path.as_uri()).save(3, {"w": np.zeros(2, dtype=np.float32)})
    line = one_line(capsys, ["ckpt", "verify", str(tmp_path), "9999"])
    assert "'9999'" in line and "no such step" in line and "steps: 3" in line
    assert main(["ckpt", "verify", str(tmp_path), "3"]) == 0  # a step that exists still verifies


@pytest.mark.timeout(300)
def test_the_human_preview_counts_what_json_lists() -> None:
    """Defect: the human preview said 79 resources where --json listed 80 (the stack resource)."""
    run = [sys.executable, "-m", "spotgpu", "preview", "--stack", "dev", "--no-policy"]
    text = subprocess.run(run, capture_output=True, text=True, timeout=240, cwd=REPO)
    doc = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=240, cwd=REPO)
    assert text.returncode == 0 and doc.returncode == 0, text.stderr + doc.stderr
    count = int(re.search(r"\): (\d+) resources", text.stdout).group(1))  # type: ignore[union-attr]
    assert count == len(json.loads(doc.stdout)["resources"])
