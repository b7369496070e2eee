"""``spotgpu drill aws``: against moto's server over real HTTP, and a Stubber for states moto can't produce."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto.server import ThreadedMotoServer

from spotgpu.cli import main
from spotgpu.drills import aws as drill

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/spotgpu-drill"


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point every boto3 client at the loopback moto server, with fake credentials."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": moto_endpoint,
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    return moto_endpoint


def _template(fis: Any, pool: str) -> str:
    """The template the InterruptionDrill component creates, as moto stores it."""
    response = fis.create_experiment_template(
        clientToken=f"token-{pool}",
        description=f"spotgpu drill for {pool}",
        roleArn=ROLE,
        stopConditions=[{"source": "none"}],
        targets={
            "pool-spot-nodes": {
                "resourceType": "aws:ec2:spot-instance",
                "resourceTags": {"spotgpu-pool": pool},
                "selectionMode": "COUNT(1)",
                "filters": [{"path": "State.Name", "values": ["running"]}],
            }
        },
        actions={
            "interrupt-spot": {
                "actionId": "aws:ec2:send-spot-instance-interruptions",
                "parameters": {"durationBeforeInterruption": "PT2M"},
                "targets": {"SpotInstances": "pool-spot-nodes"},
            }
        },
        tags={"spotgpu-pool": pool, "spotgpu-role": "drill"},
    )
    return str(response["experimentTemplate"]["id"])


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


# --- moto server (real boto3 over HTTP) -----------------------------------------------------


def test_drill_finds_the_template_by_pool_tag_and_follows_it_to_completion(aws_env: str) -> None:
    fis = boto3.client("fis", region_name=REGION)
    _template(fis, "other-pool")
    template = _template(fis, "train-aws")
    clock = FakeClock()
    lines: list[str] = []
    result = drill.run_drill(fis, "train-aws", out=lines.append, poll_seconds=5, sleep=clock.sleep, clock=clock)
    assert result.ok and result.status == "completed"
    statuses = [text for _, text in result.timeline.events if text.startswith("experiment ")]
    assert [s.split(":")[0] for s in statuses] == [
        "experiment initiating",
        "experiment running",
        "experiment completed",
    ]
    assert clock.sleeps == [5, 5]
    assert lines[0].startswith(f"drill: pool train-aws, template {template}, experiment ")
    assert lines[-1].startswith("drill passed: experiment ")
    started = fis.get_experiment(id=result.experiment_id)["experiment"]
    assert started["experimentTemplateId"] == template


def test_drill_reports_the_instances_fis_resolved(aws_env: str) -> None:
    fis = boto3.client("fis", region_name=REGION)
    instance = "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"
    template = fis.create_experiment_template(
        clientToken="by-arn",
        description="by arn",
        roleArn=ROLE,
        stopConditions=[{"source": "none"}],
        targets={
            "pool-spot-nodes": {
                "resourceType": "aws:ec2:spot-instance",
                "resourceArns": [instance],
                "selectionMode": "ALL",
            }
        },
        actions={
            "interrupt-spot": {
                "actionId": "aws:ec2:send-spot-instance-interruptions",
                "targets": {"SpotInstances": "pool-spot-nodes"},
            }
        },
        tags={"spotgpu-pool": "arn-pool"},
    )["experimentTemplate"]["id"]
    lines: list[str] = []
    clock = FakeClock()
    result = drill.run_drill(fis, "arn-pool", template, out=lines.append, sleep=clock.sleep, clock=clock)
    assert result.ok
    assert f"targets: pool-spot-nodes: {instance}" in lines


def test_drill_by_template_id(aws_env: str) -> None:
    fis = boto3.client("fis", region_name=REGION)
    template = _template(fis, "by-id-pool")
    assert drill.find_template(fis, "ignored", template) == template


def test_cli_runs_the_drill_end_to_end_and_exits_zero(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    fis = boto3.client("fis", region_name=REGION)
    _template(fis, "cli-pool")
    assert main(["drill", "aws", "--pool", "cli-pool", "--region", REGION, "--poll-seconds", "0"]) == 0
    out = capsys.readouterr().out
    assert "experiment completed" in out
    assert "drill passed" in out


def test_cli_missing_template_is_a_clear_error(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drill", "aws", "--pool", "no-such-pool", "--region", REGION]) == 2
    err = capsys.readouterr().err
    assert "no FIS experiment template tagged spotgpu-pool=no-such-pool" in err
    assert "fix:" in err


def test_cli_unknown_template_id_is_a_clear_error(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drill", "aws", "--pool", "p", "--region", REGION, "--template-id", "EXTdoesnotexist"]) == 2
    err = capsys.readouterr().err
    assert "--template-id EXTdoesnotexist: no such FIS experiment template" in err


def test_two_templates_for_one_pool_ask_for_an_id(aws_env: str) -> None:
    fis = boto3.client("fis", region_name=REGION)
    _template(fis, "twice")
    fis.create_experiment_template(
        clientToken="second",
        description="d",
        roleArn=ROLE,
        stopConditions=[{"source": "none"}],
        actions={"a": {"actionId": "aws:ec2:send-spot-instance-interruptions"}},
        tags={"spotgpu-pool": "twice"},
    )
    with pytest.raises(drill.DrillError, match=r"2 templates are tagged spotgpu-pool=twice.*--template-id"):
        drill.find_template(fis, "twice")


# --- Stubber: failures, stops and timeouts moto never produces --------------------------------


def _stubbed() -> tuple[Any, Stubber]:
    fis = boto3.client("fis", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return fis, Stubber(fis)


def _experiment(status: str, reason: str = "", action_status: str = "pending") -> dict[str, Any]:
    return {
        "experiment": {
            "id": "EXP1",
            "state": {"status": status, "reason": reason},
            "actions": {"interrupt-spot": {"state": {"status": action_status, "reason": ""}}},
        }
    }


def test_failed_experiment_exits_one_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    fis, stub = _stubbed()
    stub.add_response(
        "list_experiment_templates",
        {"experimentTemplates": [{"id": "EXT1", "tags": {"spotgpu-pool": "train"}}], "nextToken": "page2"},
        {},
    )
    stub.add_response("list_experiment_templates", {"experimentTemplates": []}, {"nextToken": "page2"})
    stub.add_response("start_experiment", {"experiment": {"id": "EXP1"}}, None)
    stub.add_response("get_experiment", _experiment("running", action_status="running"), {"id": "EXP1"})
    stub.add_response(
        "get_experiment",
        _experiment("failed", "Target resolution returned empty set", action_status="failed"),
        {"id": "EXP1"},
    )
    stub.add_response(
        "list_experiment_resolved_targets",
        {
            "resolvedTargets": [
                {
                    "targetName": "pool-spot-nodes",
                    "targetInformation": {"arn": "arn:aws:ec2:us-east-1:1:instance/i-0abc"},
                }
            ]
        },
        {"experimentId": "EXP1"},
    )
    clock = FakeClock()
    lines: list[str] = []
    with stub:
        result = drill.run_drill(fis, "train", sleep=clock.sleep, clock=clock, poll_seconds=10, out=lines.append)
    assert "targets: pool-spot-nodes: arn:aws:ec2:us-east-1:1:instance/i-0abc" in lines
    assert lines[-1] == "drill FAILED: experiment EXP1 failed (Target resolution returned empty set)"
    stub.assert_no_pending_responses()
    assert not result.ok
    assert result.status == "failed"
    assert result.reason == "Target resolution returned empty set"
    texts = [t for _, t in result.timeline.events]
    assert texts == [
        "experiment running",
        "action interrupt-spot running",
        "experiment failed: Target resolution returned empty set",
        "action interrupt-spot failed",
    ]
    assert [e for e, _ in result.timeline.events] == [0.0, 0.0, 10.0, 10.0]
    assert "+   10.0s  experiment failed" in result.timeline.render()


def test_stopped_by_alarm_is_a_failure() -> None:
    fis, stub = _stubbed()
    stub.add_response("get_experiment", _experiment("stopping", "Stop condition triggered"), {"id": "EXP1"})
    stub.add_response("get_experiment", _experiment("stopped", "Stop condition triggered"), {"id": "EXP1"})
    clock = FakeClock()
    with stub:
        result = drill.follow(fis, "EXP1", sleep=clock.sleep, clock=clock, poll_seconds=1)
    assert (result.ok, result.status) == (False, "stopped")


def test_follow_gives_up_at_the_timeout_without_sleeping_forever() -> None:
    fis, stub = _stubbed()
    for _ in range(4):
        stub.add_response("get_experiment", _experiment("running"), {"id": "EXP1"})
    clock = FakeClock()
    with stub:
        result = drill.follow(fis, "EXP1", sleep=clock.sleep, clock=clock, poll_seconds=30, timeout_seconds=90)
    assert result.status == "timeout"
    assert clock.sleeps == [30, 30, 30]
    assert result.timeline.events[-1] == (90.0, "drill timed out: still running after 90 s")


def test_cli_exit_code_is_one_when_the_experiment_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fis, stub = _stubbed()
    stub.add_response("get_experiment_template", {"experimentTemplate": {"id": "EXT1"}}, {"id": "EXT1"})
    stub.add_response("start_experiment", {"experiment": {"id": "EXP1"}}, None)
    stub.add_response("get_experiment", _experiment("cancelled", "cancelled by user"), {"id": "EXP1"})
    monkeypatch.setattr(boto3, "client", lambda *a, **k: fis)
    with stub:
        code = main(["drill", "aws", "--pool", "train", "--template-id", "EXT1", "--region", REGION])
    assert code == 1
    assert "drill FAILED: experiment EXP1 cancelled (cancelled by user)" in capsys.readouterr().out


def test_client_errors_become_one_line_with_a_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fis, stub = _stubbed()
    stub.add_client_error("list_experiment_templates", "AccessDeniedException", "not authorized to fis:List*")
    monkeypatch.setattr(boto3, "client", lambda *a, **k: fis)
    with stub:
        assert main(["drill", "aws", "--pool", "train", "--region", REGION]) == 2
    err = capsys.readouterr().err
    assert "AccessDeniedException" in err and "fix:" in err


def test_start_tags_the_experiment_with_the_pool() -> None:
    fis, stub = _stubbed()
    stub.add_response(
        "start_experiment",
        {"experiment": {"id": "EXP9"}},
        {
            "clientToken": _Any(),
            "experimentTemplateId": "EXT1",
            "tags": {"spotgpu-pool": "train", "spotgpu-role": "drill"},
        },
    )
    with stub:
        assert drill.start_experiment(fis, "EXT1", "train") == "EXP9"


class _Any:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)
