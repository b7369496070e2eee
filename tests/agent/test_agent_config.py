"""Every agent config value is checked at load: one line naming the key, the value and
the fix, exit 2 from ``spotgpu agent run --config`` (issue 22, Agent contracts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spotgpu.agent.cli import load_config
from spotgpu.config import ConfigError

BASE: dict[str, Any] = {
    "provider": "aws",
    "pool": "p",
    "notice": {"provider": "aws"},
    "checkpointStore": "file:///tmp/x",
    "checkpointIntervalSeconds": 60,
}


def write(tmp_path: Path, **changes: Any) -> Path:
    doc = {**BASE, **changes}
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(doc))
    return path


BAD = [
    ({"telemetryPort": 70000}, "telemetryPort", "70000", "1 to 65535"),
    ({"telemetryPort": -1}, "telemetryPort", "-1", "1 to 65535"),
    ({"controlSocket": "127.0.0.1:70000"}, "controlSocket", "127.0.0.1:70000", "1 to 65535"),
    ({"controlSocket": "10.0.0.5:9465"}, "controlSocket", "10.0.0.5:9465", "127.0.0.1:PORT"),
    ({"controlSocket": "agent.sock"}, "controlSocket", "agent.sock", "/path/to.sock"),
    (
        {"provider": "azure", "notice": {"provider": "azure"}, "runtime": {"pollIntervalSeconds": 0.1}},
        "runtime.pollIntervalSeconds",
        "0.1",
        "0.25",
    ),
    ({"runtime": {"pollIntervalSeconds": 0.05}}, "runtime.pollIntervalSeconds", "0.05", "0.2"),
    ({"runtime": {"noticeSignal": "SIGNOPE"}}, "runtime.noticeSignal", "SIGNOPE", "SIGUSR1"),
    ({"runtime": {"metadataUrl": "https://169.254.169.254"}}, "runtime.metadataUrl", "https://", "http://HOST"),
    ({"runtime": {"noticeHook": []}}, "runtime.noticeHook", "[]", "argv"),
    ({"lifecycleHook": "drain"}, "autoscalingGroup", "", "autoscalingGroup"),
    ({"notice": {"provider": "aws", "safetyMarginSeconds": -3}}, "notice.safetyMarginSeconds", "-3", "0 and 300"),
    ({"notice": {"provider": "gcp"}}, "notice.provider", "gcp", "pool's own notice"),
    (
        {"provider": "gcp", "notice": {"provider": "gcp"}, "runtime": {"plainReadSeconds": 0}},
        "runtime.plainReadSeconds",
        "0",
        "",
    ),
]


@pytest.mark.parametrize(("changes", "key", "value", "fix"), BAD, ids=[f"{b[1]}={b[2]}" for b in BAD])
def test_bad_value_is_one_line_naming_key_value_and_fix(
    tmp_path: Path, changes: dict[str, Any], key: str, value: str, fix: str
) -> None:
    path = write(tmp_path, **changes)
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{path}:{key}:"), line
    assert value in line and "fix:" in line and fix in line.split("fix:", 1)[1], line


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"telemetryPort": 1, "controlSocket": "127.0.0.1:65535"},
        {"telemetryPort": 0, "controlSocket": "127.0.0.1:0"},  # 0: any free port (tests, demos)
        {"controlSocket": "unix:/run/spotgpu/agent.sock"},
        {"provider": "azure", "notice": {"provider": "azure"}, "runtime": {"pollIntervalSeconds": 0.25}},
        {"runtime": {"noticeSignal": "USR1", "drainSignal": "15"}},
        {"notice": {"safetyMarginSeconds": 5}},  # the provider is the pool's
    ],
)
def test_good_values_load(tmp_path: Path, changes: dict[str, Any]) -> None:
    load_config(str(write(tmp_path, **changes)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("changes", [{"telemetryPort": 70000}, {"controlSocket": "127.0.0.1:70000"}])
def test_agent_run_exits_two_without_a_traceback(tmp_path: Path, changes: dict[str, Any]) -> None:
    path = write(tmp_path, **changes)
    run = subprocess.run(
        [sys.executable, "-m", "spotgpu", "agent", "run", "--config", str(path)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith("spotgpu agent run: ")


def test_the_example_in_the_docs_is_what_the_agent_prints(tmp_path: Path) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "agent.md").read_text()
    [example] = [line for line in docs.splitlines() if line.startswith("spotgpu agent run: /etc/spotgpu/agent.json:")]
    path = write(tmp_path, provider="azure", notice={"provider": "azure"}, runtime={"pollIntervalSeconds": 0.1})
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert f"spotgpu agent run: {err.value}" == example.replace("/etc/spotgpu/agent.json", str(path))


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["agent", "status", "--control", "127.0.0.1:70000"], "--control"),
        (["agent", "status", "--control", "10.1.2.3:9465"], "--control"),
        (["agent", "run", "--config", "{config}", "--control", "127.0.0.1:99999"], "--control"),
        (["agent", "run", "--config", "{config}", "--metadata-url", "https://169.254.169.254"], "--metadata-url"),
    ],
)
def test_bad_flags_are_one_line_and_exit_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], flag: str
) -> None:
    from spotgpu.cli import main

    config = str(write(tmp_path))
    assert main([a.replace("{config}", config) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f": {flag} " in err and "fix:" in err, err
