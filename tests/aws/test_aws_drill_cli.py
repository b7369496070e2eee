"""``spotgpu drill aws``: against moto's server over real HTTP, and a Stubber for states moto can't produce."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from spotgpu.cli import main
from spotgpu.drills import aws as drill

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/spotgpu-drill"


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


# --- --dry-run and --json (moto server) ---------------------------------------------------------


READ_ONLY_PREFIXES = ("List", "Get", "Describe")


@pytest.fixture
def recorded_calls(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every API operation the drill's boto3 clients send, by name (the proof of "no mutating call")."""
    calls: list[str] = []
    real_client = boto3.client

    def client(*args: Any, **kwargs: Any) -> Any:
        made = real_client(*args, **kwargs)
        made.meta.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
        return made

    monkeypatch.setattr(boto3, "client", client)
    return calls


def _spot_instances(pool: str, count: int = 2) -> list[str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    image = "ami-12c6146b"  # one of moto's built-in images (DescribeImages alone costs seconds)
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "spotgpu-pool", "Value": pool}]}]
    spot = ec2.run_instances(
        ImageId=image, MinCount=count, MaxCount=count, InstanceMarketOptions={"MarketType": "spot"},
        TagSpecifications=tags,
    )  # fmt: skip
    ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=tags)  # on-demand: never a target
    return sorted(i["InstanceId"] for i in spot["Instances"])


def test_dry_run_resolves_template_and_spot_targets_without_starting_anything(
    recorded_calls: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    fis = boto3.client("fis", region_name=REGION)
    template = _template(fis, "dry-pool")
    spot = _spot_instances("dry-pool")
    recorded_calls.clear()
    assert main(["drill", "aws", "--pool", "dry-pool", "--region", REGION, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"dry run: pool dry-pool, template {template}" in out
    assert "action interrupt-spot: aws:ec2:send-spot-instance-interruptions (durationBeforeInterruption=PT2M)" in out
    assert f"candidates now: {', '.join(spot)}" in out  # the on-demand instance is not a candidate
    assert "nothing was started" in out
    assert recorded_calls and all(name.startswith(READ_ONLY_PREFIXES) for name in recorded_calls), recorded_calls
    assert "DescribeInstances" in recorded_calls and "GetExperimentTemplate" in recorded_calls
    assert [e for e in fis.list_experiments()["experiments"] if e["experimentTemplateId"] == template] == []


def test_dry_run_json_is_one_document_and_the_log_goes_to_stderr(
    recorded_calls: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    fis = boto3.client("fis", region_name=REGION)
    template = _template(fis, "json-pool")
    spot = _spot_instances("json-pool", count=1)
    assert main(["drill", "aws", "--pool", "json-pool", "--region", REGION, "--dry-run", "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["status"] == "dry-run" and doc["dryRun"] is True and doc["started"] is False
    assert doc["templateId"] == template
    assert doc["targets"]["pool-spot-nodes"] == {"selectionMode": "COUNT(1)", "candidates": spot}
    assert "nothing was started" in captured.err
    assert not any(name.startswith("Start") for name in recorded_calls)


def test_dry_run_with_no_spot_instance_says_the_drill_would_fail(
    recorded_calls: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _template(boto3.client("fis", region_name=REGION), "empty-pool")
    recorded_calls.clear()
    assert main(["drill", "aws", "--pool", "empty-pool", "--region", REGION, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "matches no running Spot instance" in err and "fix:" in err and err.count("\n") == 1
    assert all(name.startswith(READ_ONLY_PREFIXES) for name in recorded_calls)


def test_fis_path_filters_are_applied_like_fis() -> None:
    instance = {"InstanceId": "i-1", "State": {"Name": "stopped"}, "Tags": [{"Key": "a"}, {"Key": "b"}]}
    assert drill._path_values(instance, "State.Name") == ["stopped"]
    assert drill._path_values(instance, "Tags.Key") == ["a", "b"]
    assert drill._path_values(instance, "Placement.AvailabilityZone") == []


def test_real_run_json_reports_the_experiment(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    _template(boto3.client("fis", region_name=REGION), "json-run")
    code = main(["drill", "aws", "--pool", "json-run", "--region", REGION, "--poll-seconds", "0", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["status"] == "passed" and doc["started"] is True
    assert doc["experimentStatus"] == "completed" and any(e["event"].startswith("experiment completed") for e in doc["timeline"])


def test_old_timeout_spelling_still_works_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    from spotgpu.cli import build_parser

    args = build_parser(["drill"]).parse_args(["drill", "aws", "--pool", "p", "--timeout", "60"])
    assert args.timeout_seconds == 60.0
    assert "--timeout is deprecated; use --timeout-seconds" in capsys.readouterr().err
