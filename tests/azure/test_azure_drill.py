"""``spotgpu drill azure`` against a stubbed ComputeManagementClient: success and failure paths."""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

from spotgpu.drills import azure as drill_mod
from spotgpu.drills.azure import Drill, DrillError

RG = "ml-prod"
SET_ID = f"/subscriptions/s/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/train-az-prod-nc24"
OTHER_ID = f"/subscriptions/s/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/other"


@dataclass
class FakeVm:
    name: str
    priority: str = "Spot"
    state: str = "running"
    scale_set: str | None = SET_ID
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def virtual_machine_scale_set(self) -> Any:
        return SimpleNamespace(id=self.scale_set.upper()) if self.scale_set else None  # ARM ids vary in case


class FakeCompute:
    """Just the calls the drill makes; ``on_poll`` scripts how Azure evolves between polls."""

    def __init__(self, vms: list[FakeVm], script: list[Any] | None = None, evict_error: Exception | None = None):
        self.vms = {vm.name: vm for vm in vms}
        self.script = list(script or [])
        self.evict_error = evict_error
        self.evicted: list[str] = []
        self.virtual_machine_scale_sets = SimpleNamespace(list=self._list_sets)
        self.virtual_machines = SimpleNamespace(
            list=self._list_vms, instance_view=self._view, simulate_eviction=self._evict
        )

    def _list_sets(self, rg: str) -> list[Any]:
        assert rg == RG
        return [
            SimpleNamespace(
                id=SET_ID, name="train-az-prod-nc24", tags={"spotgpu-pool": "train-az", "spotgpu-role": "spot-pool"}
            ),
            SimpleNamespace(id=OTHER_ID, name="other", tags={"spotgpu-pool": "other", "spotgpu-role": "spot-pool"}),
            SimpleNamespace(
                id=SET_ID + "-od", name="od", tags={"spotgpu-pool": "train-az", "spotgpu-role": "fallback"}
            ),
        ]

    def _list_vms(self, rg: str) -> list[FakeVm]:
        return list(self.vms.values())

    def _view(self, rg: str, name: str) -> Any:
        vm = self.vms.get(name)
        if vm is None:
            raise ResourceNotFoundError(f"VM {name} not found")
        return SimpleNamespace(
            statuses=[
                SimpleNamespace(code="ProvisioningState/succeeded"),
                SimpleNamespace(code=f"PowerState/{vm.state}"),
            ]
        )

    def _evict(self, rg: str, name: str) -> None:
        if self.evict_error:
            raise self.evict_error
        self.evicted.append(name)

    def step(self) -> None:
        if self.script:
            self.script.pop(0)(self)


class Clock:
    def __init__(self, client: FakeCompute) -> None:
        self.now = 1000.0
        self.client = client

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.client.step()


def _drill(client: FakeCompute, timeout: float = 600) -> tuple[Drill, io.StringIO]:
    clock = Clock(client)
    out = io.StringIO()
    return Drill(
        client, RG, "train-az", timeout_seconds=timeout, poll_seconds=10, clock=clock, sleep=clock.sleep, out=out
    ), out


def _delete(name: str):  # type: ignore[no-untyped-def]
    return lambda c: c.vms.pop(name)


def _set(name: str, state: str, **kw: Any):  # type: ignore[no-untyped-def]
    def apply(c: FakeCompute) -> None:
        if name in c.vms:
            c.vms[name].state = state
        else:
            c.vms[name] = FakeVm(name, state=state, **kw)

    return apply


def test_evicts_a_running_spot_vm_and_follows_it_to_a_replacement() -> None:
    client = FakeCompute(
        [
            FakeVm("train-az-prod-nc24_aaaa0001", state="stopped"),
            FakeVm("train-az-prod-nc24_aaaa0002"),
            FakeVm("x", scale_set=OTHER_ID),
        ],
        script=[
            _set("train-az-prod-nc24_aaaa0002", "stopping"),
            _delete("train-az-prod-nc24_aaaa0002"),
            _set("train-az-prod-nc24_bbbb0003", "starting"),
            _set("train-az-prod-nc24_bbbb0003", "running"),
        ],
    )
    drill, out = _drill(client)
    result = drill.run()
    assert client.evicted == ["train-az-prod-nc24_aaaa0002"]  # the running one, never the other pool's
    assert result.evicted_vm == "train-az-prod-nc24_aaaa0002"
    assert result.replacement_vm == "train-az-prod-nc24_bbbb0003"
    texts = [e.text for e in result.timeline]
    assert texts[0].startswith("picked running Spot VM train-az-prod-nc24_aaaa0002")
    assert texts[1].startswith("eviction requested")
    assert "train-az-prod-nc24_aaaa0002: stopping" in texts
    assert "train-az-prod-nc24_aaaa0002: deleted" in texts
    assert texts[-1] == "replacement train-az-prod-nc24_bbbb0003 running"
    assert [e.seconds for e in result.timeline] == sorted(e.seconds for e in result.timeline)
    assert result.timeline[-1].seconds == 40.0
    assert "s  replacement train-az-prod-nc24_bbbb0003 running" in out.getvalue()


def test_deallocate_policy_counts_a_restored_vm_as_the_replacement() -> None:
    vm = "train-az-prod-nc24_aaaa0001"
    client = FakeCompute([FakeVm(vm)], script=[_set(vm, "deallocated"), _set(vm, "starting"), _set(vm, "running")])
    result = _drill(client)[0].run()
    assert result.replacement_vm == vm
    assert f"{vm}: deallocated" in [e.text for e in result.timeline]


def test_vm_tagged_with_the_pool_counts_without_a_scale_set_reference() -> None:
    client = FakeCompute(
        [FakeVm("tagged", scale_set=None, tags={"spotgpu-pool": "train-az"})],
        script=[_delete("tagged"), _set("new", "running")],
    )
    assert _drill(client)[0].run().evicted_vm == "tagged"


def test_no_vms_is_a_clear_error() -> None:
    with pytest.raises(DrillError, match="the pool has no VMs"):
        _drill(FakeCompute([FakeVm("x", scale_set=OTHER_ID)]))[0].run()


def test_no_pool_scale_sets_is_a_clear_error() -> None:
    client = FakeCompute([])
    client.virtual_machine_scale_sets = SimpleNamespace(list=lambda rg: [])
    with pytest.raises(DrillError, match="no spot scale set tagged spotgpu-pool=train-az"):
        _drill(client)[0].run()


def test_only_regular_priority_vms_is_refused() -> None:
    client = FakeCompute([FakeVm("reg1", priority="Regular")])
    with pytest.raises(DrillError, match=r"only regular-priority VMs \['reg1'\]"):
        _drill(client)[0].run()
    assert client.evicted == []


def test_naming_a_regular_vm_is_refused() -> None:
    client = FakeCompute([FakeVm("reg1", priority="Regular"), FakeVm("spot1")])
    with pytest.raises(DrillError, match="VM reg1 has priority Regular; simulate eviction works on Spot VMs only"):
        _drill(client)[0].run("reg1")
    assert client.evicted == []


def test_naming_a_vm_outside_the_pool_or_not_running_is_refused() -> None:
    client = FakeCompute([FakeVm("spot1"), FakeVm("spot2", state="deallocated")])
    with pytest.raises(DrillError, match="not a member of the pool"):
        _drill(client)[0].run("elsewhere")
    with pytest.raises(DrillError, match="VM spot2 is deallocated, not running"):
        _drill(client)[0].run("spot2")


def test_no_running_spot_vm_is_an_error() -> None:
    with pytest.raises(DrillError, match="no Spot VM of the pool is running"):
        _drill(FakeCompute([FakeVm("s1", state="deallocated")]))[0].run()


def test_api_error_from_simulate_eviction_is_reported() -> None:
    err = HttpResponseError(message="OperationNotAllowed: eviction simulation is not supported")
    client = FakeCompute([FakeVm("spot1")], evict_error=err)
    with pytest.raises(DrillError, match=r"simulate_eviction\(spot1\) failed: OperationNotAllowed"):
        _drill(client)[0].run()


def test_timeout_waiting_for_eviction() -> None:
    drill, _ = _drill(FakeCompute([FakeVm("spot1")]), timeout=60)
    with pytest.raises(DrillError, match="timed out after 60 s waiting for spot1 to be evicted"):
        drill.run()
    assert drill.timeline[-1].text.startswith("eviction requested")


def test_timeout_waiting_for_a_replacement_keeps_the_timeline() -> None:
    drill, _ = _drill(FakeCompute([FakeVm("spot1")], script=[_delete("spot1")]), timeout=120)
    with pytest.raises(DrillError, match="waiting for a replacement Spot VM to run"):
        drill.run()
    assert drill.timeline[-1].text == "spot1: deleted"


def test_instance_view_errors_other_than_not_found_propagate() -> None:
    client = FakeCompute([FakeVm("spot1")])

    def boom(rg: str, name: str) -> Any:
        raise HttpResponseError(message="throttled")

    client.virtual_machines.instance_view = boom
    with pytest.raises(HttpResponseError, match="throttled"):
        _drill(client)[0].run()


def _args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    drill_mod.register(parser.add_subparsers())
    return parser.parse_args(["azure", "--pool", "train-az", "--subscription", "s", "--resource-group", RG, *extra])


def test_cli_registers_and_returns_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """2: nothing to evict (the drill never started); 1: evicted, then no replacement in time."""
    args = _args("--timeout-seconds", "0")
    assert args.func is drill_mod.run and args.poll_seconds == 10.0
    assert drill_mod.run(args, client_factory=lambda sub: FakeCompute([])) == 2
    assert "the pool has no VMs" in capsys.readouterr().err
    client = FakeCompute([FakeVm("spot1")])
    clock = Clock(client)
    assert drill_mod.run(args, client_factory=lambda sub: client, clock=clock, sleep=clock.sleep) == 1
    assert client.evicted == ["spot1"] and "timed out after 0 s" in capsys.readouterr().err


def test_old_flag_spellings_still_parse() -> None:
    args = _args("--poll", "3", "--timeout", "9")
    assert (args.poll_seconds, args.timeout_seconds) == (3.0, 9.0)


def test_cli_success_path_prints_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeCompute([FakeVm("spot1")], script=[_delete("spot1"), _set("spot2", "running")])
    clock = Clock(client)
    args = _args("--timeout-seconds", "600", "--poll-seconds", "5")
    assert drill_mod.run(args, client_factory=lambda sub: client, clock=clock, sleep=clock.sleep) == 0
    out = capsys.readouterr().out
    assert "drill passed: spot1 evicted, spot2 running after 10.0 s" in out


def test_dry_run_picks_the_vm_and_evicts_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeCompute([FakeVm("spot1", state="deallocated"), FakeVm("spot2"), FakeVm("od", priority="Regular")])
    assert drill_mod.run(_args("--dry-run"), client_factory=lambda sub: client) == 0
    out = capsys.readouterr().out
    assert "picked running Spot VM spot2" in out and "would call simulate_eviction on spot2" in out
    assert client.evicted == []
    assert drill_mod.run(_args("--dry-run", "--json", "--vm", "spot2"), client_factory=lambda sub: client) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "dry-run" and doc["vm"] == "spot2" and doc["started"] is False
    assert client.evicted == []


def test_dry_run_still_validates_the_named_vm(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeCompute([FakeVm("od", priority="Regular")])
    assert drill_mod.run(_args("--dry-run", "--vm", "od"), client_factory=lambda sub: client) == 2
    assert "simulate eviction works on Spot VMs only" in capsys.readouterr().err


def test_sdk_errors_before_the_eviction_are_one_line_and_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeCompute([FakeVm("spot1")])

    def denied(rg: str) -> list[Any]:
        raise HttpResponseError("(AuthorizationFailed) no Microsoft.Compute/virtualMachineScaleSets/read\nmore")

    client.virtual_machine_scale_sets.list = denied
    assert drill_mod.run(_args(), client_factory=lambda sub: client) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "AuthorizationFailed" in err and "fix: check `az login`" in err


def test_json_of_a_passed_drill(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeCompute([FakeVm("spot1")], script=[_delete("spot1"), _set("spot2", "running")])
    clock = Clock(client)
    assert drill_mod.run(_args("--json"), client_factory=lambda sub: client, clock=clock, sleep=clock.sleep) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "passed" and doc["started"] is True and doc["replacement"] == "spot2"
    assert doc["log"][-1].startswith("drill passed: spot1 evicted")
