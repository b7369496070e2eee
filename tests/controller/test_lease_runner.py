"""The runner's lease hook: a tick that cannot take the lease does nothing and says why."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from controller_factories import aws_controller_config

from spotgpu.contract.state_store import MemoryJsonStore
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.lease import FENCE_FIELD, Lease
from spotgpu.controller.runner import RECORD_KEY, Controller
from spotgpu.controller.telemetry import ControllerTelemetry


def _config() -> ControllerConfig:
    return aws_controller_config(target=1, max_size=2, waits=(300, 300, 300, 3600))

class _Unreachable:
    """A cloud that cannot be observed: the tick still saves the record, and counts the calls."""

    def __init__(self) -> None:
        self.observed = 0

    def observe(self, now: float) -> object:
        self.observed += 1
        raise RuntimeError("no cloud in this test")

    def apply(self, action: object) -> None:
        raise AssertionError("nothing to apply")

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None


def _controller(store: MemoryJsonStore, holder: str) -> tuple[Controller, _Unreachable, io.StringIO]:
    out, cloud = io.StringIO(), _Unreachable()
    lease = Lease(store, ttl_seconds=60, max_clock_skew_seconds=5, holder=holder)
    return Controller(_config(), {"pool-a": cloud}, store, ControllerTelemetry(json_lines=out), lease=lease), cloud, out


def _events(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_only_the_lease_holder_ticks_and_the_other_says_why() -> None:
    store = MemoryJsonStore()
    first, first_cloud, first_out = _controller(store, "first-holder")
    second, second_cloud, second_out = _controller(store, "second-holder")
    first.tick(1000.0)
    record = store.get(RECORD_KEY)
    assert record is not None and record[FENCE_FIELD] == 1
    assert second.tick(1001.0) == {}
    assert second_cloud.observed == 0, "a refused tick must not even observe"
    assert store.get(RECORD_KEY) == record
    refused = [e for e in _events(second_out) if e["kind"] == "lease_refused"]
    assert refused and "held by first-ho (token 1)" in str(refused[0]["reason"])
    first.tick(1030.0)
    assert first_cloud.observed == 2
    assert [e["how"] for e in _events(first_out) if e["kind"] == "lease"] == ["taken", "renewed"]


def test_a_released_lease_passes_to_the_next_one_shot_run_with_a_higher_token() -> None:
    store = MemoryJsonStore()
    first, _, _ = _controller(store, "first-holder")
    first.tick(1000.0)
    assert first.lease is not None
    first.lease.release()
    second, second_cloud, _ = _controller(store, "second-holder")
    second.tick(1060.0)
    assert second_cloud.observed == 1
    assert store.get(RECORD_KEY)[FENCE_FIELD] == 2  # type: ignore[index]


def test_cli_once_with_the_lease_held_elsewhere_does_nothing_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import yaml

    from spotgpu.cli import main
    from spotgpu.contract.state_store import ObjectJsonStore
    from spotgpu.controller.config import ControllerConfig
    from spotgpu.controller.lease import LEASE_KEY

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    doc = _config().model_dump(by_alias=True, mode="json", exclude_none=True)
    doc["stateUrl"] = (tmp_path / "state").as_uri()
    ControllerConfig.model_validate(doc)
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(doc))
    store = ObjectJsonStore(doc["stateUrl"])
    store.write_if(LEASE_KEY, {"holder": "othercontroller", "token": 3, "expiresAt": time.time() + 600}, None)
    assert main(["controller", "run", "--config", str(path), "--once"]) == 0
    captured = capsys.readouterr()
    assert "lease held by othercon (token 3)" in captured.err and "does nothing" in captured.err
    assert store.get(RECORD_KEY) is None
