"""The GCP drill against stubbed Compute clients: happy paths and every failure path."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings
from collections.abc import Iterable
from types import SimpleNamespace as NS
from typing import Any

import pytest

from spotgpu.drills import gcp as drill

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # google.api_core's Python-version notice
    from google.api_core import exceptions as gexc

URL = "https://www.googleapis.com/compute/v1/projects/p/zones/{zone}/instances/{name}"


def vm(name: str, vid: int, status: str = "RUNNING", action: str = "NONE", zone: str = "us-central1-b") -> NS:
    return NS(
        name=name, id=vid, instance_status=status, current_action=action, instance=URL.format(zone=zone, name=name)
    )


def mig(name: str, pool: str | None = "train", role: str = "spot-pool") -> NS:
    labels = {"spotgpu-pool": pool, "spotgpu-role": role} if pool else {}
    return NS(name=name, all_instances_config=NS(properties=NS(labels=labels)))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class StubMigs:
    """``list`` returns the MIGs; each ``list_managed_instances`` call returns the next snapshot."""

    def __init__(self, migs: list[NS], snapshots: list[Any]) -> None:
        self.migs, self.snapshots, self.calls = migs, snapshots, 0

    def list(self, *, project: str, region: str) -> Iterable[Any]:
        if isinstance(self.migs, Exception):
            raise self.migs
        return self.migs

    def list_managed_instances(self, *, project: str, region: str, instance_group_manager: str) -> Iterable[Any]:
        snap = self.snapshots[min(self.calls, len(self.snapshots) - 1)]
        self.calls += 1
        if isinstance(snap, Exception):
            raise snap
        return snap


class StubInstances:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[tuple[str, str, str]] = []

    def simulate_maintenance_event(self, *, project: str, zone: str, instance: str) -> Any:
        self.calls.append((project, zone, instance))
        if self.error:
            raise self.error
        return NS(name="operation-123")


def _run(
    migs: StubMigs, instances: StubInstances | None = None, **kw: Any
) -> tuple[drill.DrillResult | None, list[str], FakeClock]:
    clock = FakeClock()
    lines: list[str] = []
    result = drill.run_drill(
        drill.GcpClients(migs, instances or StubInstances()),
        project="p",
        region="us-central1",
        pool="train",
        clock=clock,
        sleep=clock.sleep,
        out=lines.append,
        poll_seconds=10,
        **kw,
    )
    return result, lines, clock


def test_delete_action_replacement_timeline() -> None:
    a, b = vm("train-prod-spot-aopt-a", 1), vm("train-prod-spot-aopt-b", 2, zone="us-central1-c")
    snapshots = [
        [b, a],
        [vm(a.name, 1, "STOPPING", "DELETING"), b],
        [b],
        [b, vm(a.name, 3, "", "CREATING", zone="us-central1-a")],
        [b, vm(a.name, 3, "RUNNING", zone="us-central1-a")],
    ]
    instances = StubInstances()
    result, lines, _ = _run(
        StubMigs([mig("other-prod-spot-aopt", "other"), mig("train-prod-spot-aopt")], snapshots), instances
    )
    assert instances.calls == [("p", "us-central1-b", "train-prod-spot-aopt-a")]
    assert result is not None
    assert result.victim == "train-prod-spot-aopt-a" and result.zone == "us-central1-b"
    assert result.mig == "train-prod-spot-aopt" and result.replacement == a.name
    assert result.reacquired_after_seconds == 40
    assert lines[0].startswith("+    0.0s  picked train-prod-spot-aopt-a in us-central1-b")
    assert not any(b.name in line for line in lines[2:])  # an untouched VM is not reported


def test_follow_sees_victim_deleted_and_recreated_with_same_name() -> None:
    a = vm("train-prod-spot-aopt-a", 1)
    snapshots = [
        [a],
        [vm(a.name, 1, "STOPPING", "DELETING")],
        [],
        [vm(a.name, 7, "STAGING", "CREATING", zone="us-central1-c")],
        [vm(a.name, 7, "RUNNING", zone="us-central1-c")],
    ]
    result, lines, _ = _run(StubMigs([mig("train-prod-spot-aopt")], snapshots))
    assert result is not None and result.replacement == a.name
    assert result.reacquired_after_seconds == 40
    text = "\n".join(lines)
    assert "STOPPING/DELETING" in text and "gone from the MIG" in text and "(id 7): RUNNING/NONE" in text
    assert lines[-1].endswith("reacquired after 40 s")


def test_stop_action_same_vm_restarted_counts_as_replacement() -> None:
    a = vm("train-prod-spot-aopt-a", 1)
    snapshots = [[a], [vm(a.name, 1, "TERMINATED", "NONE")], [vm(a.name, 1, "STAGING", "STARTING")], [a]]
    result, _, _ = _run(StubMigs([mig("train-prod-spot-aopt")], snapshots))
    assert result is not None and result.reacquired_after_seconds == 30


def test_unlabelled_mig_found_by_name_convention() -> None:
    a = vm("train-dev-spot-t4x1-a", 1)
    migs = [mig("train-dev-spot-t4x1", pool=None), mig("training-dev-spot-aopt", pool=None)]
    instances = StubInstances()
    result, lines, _ = _run(StubMigs(migs, [[a]]), instances, dry_run=True)
    assert result.dry_run and result.victim == "train-dev-spot-t4x1-a" and "train-dev-spot-t4x1" in lines[0]
    assert "dry run: would call simulateMaintenanceEvent on train-dev-spot-t4x1-a" in lines[-1]
    assert instances.calls == []  # the one mutating call was not made


def test_environment_narrows_the_search() -> None:
    with pytest.raises(drill.DrillError, match="no spot MIG of pool 'train'"):
        _run(StubMigs([mig("train-prod-spot-aopt")], [[vm("x", 1)]]), environment="dev")


def test_no_mig() -> None:
    with pytest.raises(drill.DrillError, match="no spot MIG of pool 'train'"):
        _run(StubMigs([mig("train-prod-od", role="fallback"), mig("x-prod-spot-aopt", "x")], [[]]))


def test_no_running_instance() -> None:
    snap = [vm("a", 1, "STAGING", "CREATING"), vm("b", 2, "RUNNING", "RECREATING")]
    with pytest.raises(drill.DrillError, match="no RUNNING VM"):
        _run(StubMigs([mig("train-prod-spot-aopt")], [snap]))


def test_api_errors_are_explained() -> None:
    with pytest.raises(drill.DrillError, match="listing MIGs in p/us-central1 failed"):
        _run(StubMigs(gexc.Forbidden("no compute.instanceGroupManagers.list"), []))  # type: ignore[arg-type]
    with pytest.raises(drill.DrillError, match=r"simulateMaintenanceEvent on a failed.*rate"):
        _run(
            StubMigs([mig("train-prod-spot-aopt")], [[vm("a", 1)]]), StubInstances(gexc.TooManyRequests("rate limited"))
        )


def test_one_poll_blip_is_tolerated_but_repeated_failures_abort() -> None:
    a = vm("a", 1)
    blip = [[a], gexc.ServiceUnavailable("blip"), [], [vm("a", 2)]]
    result, lines, _ = _run(StubMigs([mig("train-prod-spot-aopt")], blip))
    assert result is not None and any("poll failed (1/3)" in line for line in lines)
    down = [[a], gexc.ServiceUnavailable("down")]
    with pytest.raises(drill.DrillFailed, match="failed 3 times in a row"):
        _run(StubMigs([mig("train-prod-spot-aopt")], down))


def test_timeout_waiting_for_replacement() -> None:
    a = vm("a", 1)
    snapshots = [[a], [], [vm("a", 2, "", "CREATING")]]  # stuck creating (e.g. ZONE_RESOURCE_POOL_EXHAUSTED)
    with pytest.raises(drill.DrillTimeout, match=r"not replaced within 60 s.*list-errors"):
        _run(StubMigs([mig("train-prod-spot-aopt")], snapshots), timeout_seconds=60)


def test_new_vm_while_victim_still_running_is_not_a_replacement() -> None:
    a = vm("a", 1)
    snapshots = [[a], [a, vm("b", 9)], [vm("b", 9)]]
    result, _, _ = _run(StubMigs([mig("train-prod-spot-aopt")], snapshots))
    assert result is not None and result.replacement == "b" and result.reacquired_after_seconds == 20


ARGS = ["gcp", "--pool", "train", "--project", "p", "--region", "us-central1"]


def _args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    drill.register(parser.add_subparsers())
    return parser.parse_args([*ARGS, *extra])


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """2: could not start (nothing was preempted); 1: preempted, then not replaced in time."""
    args = _args("--timeout-seconds", "0")
    assert args.func is drill._command
    assert drill._command(args, lambda: drill.GcpClients(StubMigs([], []), StubInstances())) == 2
    assert capsys.readouterr().err.startswith("spotgpu drill gcp: no spot MIG of pool 'train'")
    clients = drill.GcpClients(StubMigs([mig("train-prod-spot-aopt")], [[vm("a", 1)]]), StubInstances())
    assert drill._command(args, lambda: clients) == 1
    assert "was not replaced within 0 s" in capsys.readouterr().err


def test_old_flag_spellings_still_parse() -> None:
    args = _args("--poll", "3", "--timeout", "9")
    assert (args.poll_seconds, args.timeout_seconds) == (3.0, 9.0)
    assert (_args().poll_seconds, _args().timeout_seconds) == (15.0, 1800.0)


def test_dry_run_cli_prints_the_pick_and_json_has_it(capsys: pytest.CaptureFixture[str]) -> None:
    instances = StubInstances()
    clients = drill.GcpClients(StubMigs([mig("train-prod-spot-aopt")], [[vm("train-prod-spot-aopt-a", 1)]]), instances)
    assert drill._command(_args("--dry-run"), lambda: clients) == 0
    assert "would call simulateMaintenanceEvent on train-prod-spot-aopt-a" in capsys.readouterr().out
    assert drill._command(_args("--dry-run", "--json"), lambda: clients) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["status"] == "dry-run" and doc["victim"] == "train-prod-spot-aopt-a" and doc["started"] is False
    assert "picked train-prod-spot-aopt-a" in captured.err
    assert instances.calls == []


def test_json_of_a_passed_drill_has_the_latency(capsys: pytest.CaptureFixture[str]) -> None:
    a = vm("a", 1)
    clients = drill.GcpClients(StubMigs([mig("train-prod-spot-aopt")], [[a], [], [vm("a", 2)]]), StubInstances())
    args = _args("--json", "--poll-seconds", "0")
    assert drill._command(args, lambda: clients) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "passed" and doc["started"] is True and doc["replacement"] == "a"


def test_spotgpu_cli_knows_the_command() -> None:
    from spotgpu.cli import build_parser

    args = build_parser().parse_args(["drill", "gcp", "--pool", "x", "--project", "p", "--region", "r", "--dry-run"])
    assert args.dry_run is True and args.func is drill._command


def test_missing_sdk_is_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    def no_sdk() -> drill.GcpClients:
        raise ModuleNotFoundError("No module named 'google.cloud.compute_v1'", name="google.cloud.compute_v1")

    assert drill._command(_args("--dry-run"), no_sdk) == 2
    assert "pip install 'spotgpu[gcp]'" in capsys.readouterr().err


def test_cli_startup_does_not_load_the_google_sdk() -> None:
    code = "import sys, spotgpu.cli; spotgpu.cli.build_parser(); print('google.api_core' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False" and "FutureWarning" not in run.stderr


def test_missing_credentials_is_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    def no_credentials() -> drill.GcpClients:
        raise RuntimeError("Your default credentials were not found")

    assert drill._command(_args("--dry-run"), no_credentials) == 2
    assert "application-default login" in capsys.readouterr().err


def test_real_compute_v1_messages_are_understood() -> None:
    """The stubs above use plain objects; the real proto messages (enum fields as str, 0 ids) work too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from google.cloud import compute_v1

    group = compute_v1.InstanceGroupManager(
        name="train-prod-spot-aopt",
        all_instances_config={"properties": {"labels": {"spotgpu-pool": "train", "spotgpu-role": "spot-pool"}}},
    )

    def managed(vid: int, status: str, action: str = "NONE") -> Any:
        url = URL.format(zone="us-central1-a", name="train-prod-spot-aopt-q")
        return compute_v1.ManagedInstance(
            id=vid, name="train-prod-spot-aopt-q", instance=url, instance_status=status, current_action=action
        )

    snapshots = [
        [managed(1, "RUNNING")],
        [compute_v1.ManagedInstance(name="x", current_action="CREATING")],
        [managed(2, "RUNNING")],
    ]
    result, _, _ = _run(StubMigs([group], snapshots))  # type: ignore[list-item]
    assert result is not None and result.zone == "us-central1-a" and result.reacquired_after_seconds == 20
