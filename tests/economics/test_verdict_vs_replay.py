"""Issue 35: the verdict a platform team reads holds up against the project's own replay.

Every figure says where it came from; the preview replays each traced pool's ladder beside the model
and says DISPUTED (naming the figure) when they disagree; the policy pack judges on the more
pessimistic of the two; unmeasured GPU models take a spec prior, never 1.0; one unit per column; the
shipped stacks use fitted figures and preview with no idle rung and no dispute.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from doc_blocks import block_after
from test_pool_economics import REPO, _cli, _project


def _economics(project: Path, stack: str, *extra: str) -> dict[str, Any]:
    done = _cli("preview", "--program", str(project), "--stack", stack, "--json", *extra)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _typed_rate(config: dict[str, Any]) -> None:
    """The prod stack as it shipped before: a typed 0.08 interruptions per node-hour, no gang rate, no tiers."""
    workload = config["spotgpu:workloads"]["llm-finetune"]
    workload["interruptionsPerHour"] = 0.08
    workload.pop("gangInterruptionsPerHour")
    workload.pop("sources")
    workload.pop("checkpointTiers")


def test_a_typed_rate_far_below_the_traces_rate_previews_as_disputed_naming_the_key(tmp_path: Path) -> None:
    """Defect: the preview said SPOT-ELIGIBLE (saves 53 %) where the replay of the same pool on the shipped
    traces saved a few percent, and never mentioned the replay or the typed 0.08 the traces contradict."""
    project = _project(tmp_path, "typed", _typed_rate)
    pools = _economics(project, "typed", "--no-policy")["economics"]["pools"]
    aws = pools["train-aws"]["replay"]
    assert aws["status"] == "disputed" and aws["line"].startswith("DISPUTED: the model saves")
    driver = aws["drivers"][0]
    assert driver["key"] == "interruptionsPerHour" and driver["value"] == 0.08
    assert driver["source"] == "typed: workloads.llm-finetune.interruptionsPerHour"
    assert driver["tracesValue"] > 5 * 0.08  # the traces' rate for the pool's zones
    assert "interruptionsPerHour 0.08/h (typed: workloads.llm-finetune.interruptionsPerHour)" in aws["line"]
    assert aws["replayToModel"] > 1.15 and aws["jobs"] > 0 and "seconds" not in aws  # the document stays byte-stable
    for name in ("train-gcp", "train-az"):  # no traces ship for these clouds
        assert pools[name]["replay"] == {**pools[name]["replay"], "status": "model only",
                                         "line": "model only, no traces for this cloud"}  # fmt: skip
    text = _cli("preview", "--program", str(project), "--stack", "typed", "--no-policy")
    assert "      replay: DISPUTED: the model saves" in text.stdout and "replay: model only" in text.stdout
    # docs/economics.md §4 shows this very line, as the preview prints it
    shown = block_after("economics.md", "### The model checked against the replay", language="").strip("\n")
    assert shown == f"      replay: {aws['line']}" and shown in text.stdout.splitlines()


def _dear_spot(config: dict[str, Any]) -> None:
    """A spot price near on-demand and a typed rate far below the traces': the model says spot, the replay not."""
    workload = config["spotgpu:workloads"]["llm-finetune"]
    workload.update(interruptionsPerHour=0.01, expectedReacquisitionSeconds=600)
    workload.pop("gangInterruptionsPerHour")
    workload.pop("sources")
    config["spotgpu:pools"][0]["spotPerHour"] = 4.5
    for step in config["spotgpu:ladders"]["training-aws"]["steps"][:2]:
        step["costCeilingPerHour"] = 5


def test_the_policy_pack_judges_on_the_more_pessimistic_of_the_model_and_the_replay(tmp_path: Path) -> None:
    project = _project(tmp_path, "dear", _dear_spot)
    (project / "policy-config.json").write_text((REPO / "policy-config.json").read_text())
    doc = _economics(project, "dear")
    aws = doc["economics"]["pools"]["train-aws"]
    assert aws["spotEligible"] and aws["replay"]["modelEligible"]  # the model alone calls it spot-eligible
    assert not aws["replay"]["replayEligible"] and not aws["replay"]["pessimisticEligible"]
    found = [v for v in doc["policy"]["violations"] if v["policy"] == "spot-eligible"]
    assert found and all("train-aws" in v["urn"] for v in found), found
    assert "spot is not worth it by the replay of its ladder on the traces" in found[0]["message"]
    # the preview's own check, word for word (the figures' sources aside: the pack reads them from the workload tag)
    assert aws["replay"]["line"].split("; driven by")[0] in found[0]["message"]


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_shipped_stacks_preview_with_no_idle_rung_no_dispute_and_no_warning(stack: str) -> None:
    """The stacks users copy show the product at its best: fitted figures, per-pool prices, every rung able to
    act, the model agreeing with the replay where there are traces, and no warning about the stack."""
    from spotgpu.economics.report import load_stack
    from spotgpu.models.stack import idle_rungs

    config = load_stack(stack, REPO)
    assert all(idle_rungs(p, config.ladder_for(p), config.workload_for(p)) == [] for p in config.pools)
    doc = _economics(REPO, stack)
    assert doc["policy"]["violations"] == []
    pools = doc["economics"]["pools"]
    for name, pool in pools.items():
        assert "warnings" not in pool, name
        status = pool["replay"]["status"]
        assert status == ("agrees" if pool["cloud"] == "aws" else "model only"), (name, pool["replay"]["line"])
        assert pool["prices"]["spotSource"] == f"pools[{name}].spotPerHour"  # per-pool spot prices
        assert pool["figures"]["interruptionsPerHour"]["kind"] == "fitted"  # fitted, not guessed
        assert pool["figures"]["prices"]["onDemandPerHour"]["kind"] == "catalogue"  # each pool's own catalogue price
    done = _cli("preview", "--stack", stack)
    text = done.stdout
    assert "WARNING" not in text and "DISPUTED" not in text and "no violations" in text
    # stderr too: its one line is the reminder to build the AWS controller's package before `pulumi up`
    # (a fresh clone has no dist/), which is about this machine, not the stack
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert all("the controller package" in x and "before `pulumi up`" in x for x in lines), lines


@pytest.mark.parametrize(("stack", "pool"), [("prod", "train-aws"), ("dev", "dev-aws")])
def test_the_stacks_figures_are_what_the_command_in_their_comment_fits(stack: str, pool: str) -> None:
    """Fitted, not guessed: the command the stack's comment names prints the figures the stack types."""
    text = (REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    command = next(line.split("#", 1)[1].strip() for line in text.splitlines()
                   if "spotgpu profile fit --traces" in line and f"--pool {pool}" in line)  # fmt: skip
    argv = shlex.split(command)
    done = _cli(*argv[1:], "--json")
    assert done.returncode == 0, done.stderr
    group = json.loads(done.stdout)["groups"][0]
    fitted, sources = group["measuredProfile"], group["sources"]
    workload = next(iter(yaml.safe_load(text)["config"]["spotgpu:workloads"].values()))
    assert fitted and {k: workload[k] for k in fitted} == fitted
    assert {k: workload["sources"][k] for k in sources} == sources  # and says where each came from


def test_the_docs_trace_fit_recipe_prints_the_documented_figures() -> None:
    """docs/economics.md "Availability traces": the command block run exactly as written, from the repository."""
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    from doc_blocks import block_after

    command = block_after("economics.md", "<!-- tested: tests/economics/test_verdict_vs_replay.py", "bash").strip()
    done = _cli(*shlex.split(command)[1:])
    assert done.returncode == 0, done.stderr
    doc = (REPO / "docs" / "economics.md").read_text()
    printed = doc[doc.index(command):].split("ends with\n\n```\n", 1)[1].split("```", 1)[0]
    for line in printed.splitlines()[1:]:  # each figure, as the docs show it (their comment shortened)
        assert line.split("#")[0].rstrip() in done.stdout, line


def test_every_figure_says_where_it_came_from_in_the_preview_cost_and_json(tmp_path: Path) -> None:
    """Typed (the key), fitted from traces (the traces and runs, via a measured profile), or the catalogue."""
    fitted = tmp_path / "fitted.yaml"
    run = _cli("profile", "fit", "--traces", "spotgpu/data/traces/availability/1-node/aws-02-15-2023", "--stack", "prod",
               "--pool", "train-aws", "--out", str(fitted))  # fmt: skip
    assert run.returncode == 0, run.stderr
    sources = yaml.safe_load(fitted.read_text())["sources"]
    assert sources["interruptionsPerHour"].startswith("fitted from traces: ") and "losses in" in sources["interruptionsPerHour"]

    def measured(config: dict[str, Any]) -> None:
        config["spotgpu:workloads"]["llm-finetune"]["measuredProfile"] = str(fitted)

    project = _project(tmp_path / "p", "fit", measured)
    done = _cli("cost", "--stack", "fit", "--program", str(project), "--pool", "train-aws", "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)["figures"]
    assert figures["interruptionsPerHour"]["kind"] == "fitted"
    assert figures["interruptionsPerHour"]["from"].endswith(f"(measuredProfile {fitted})")
    assert figures["checkpointWriteSeconds"]["kind"] == "copied"  # in the file, but its base's, not measured
    assert figures["workHours"] == {"value": 36, "kind": "typed", "from": "workloads.llm-finetune.workHours"}
    assert figures["prices"]["spotPerHour"] == {"value": 2.2, "kind": "typed", "from": "pools[train-aws].spotPerHour"}
    assert figures["prices"]["onDemandPerHour"]["kind"] == "catalogue"
    assert figures["prices"]["storagePerGbMonth"]["kind"] == "default"
    text = _cli("cost", "--stack", "fit", "--program", str(project), "--pool", "train-aws").stdout
    assert re.search(r"interruptionsPerHour +0\.7535  fitted from traces: ", text)
    profile = _cli("cost", "--profile", "tests/economics/data/llm-finetune.yaml", "--json")
    typed = json.loads(profile.stdout)["figures"]["interruptionsPerHour"]
    assert typed == {"value": 0.7535, "kind": "typed", "from": "tests/economics/data/llm-finetune.yaml: interruptionsPerHour"}


def _l4_and_a100(config: dict[str, Any], table: dict[str, float] | None) -> None:
    gcp = config["spotgpu:pools"][1]
    gcp["machineTypes"] = [{"machineType": "a2-highgpu-4g"}, {"machineType": "g2-standard-48"}]
    if table is not None:  # 4 GPUs a node: the Azure pool's 1-GPU sizes would need 8 nodes
        config["spotgpu:workloads"]["llm-finetune"]["gpu"] = {"gpusPerNode": 4, "relativeThroughput": table}
        config["spotgpu:pools"] = [gcp]


@pytest.mark.parametrize("table", [None, {"A100": 1.0}])
def test_an_l4_is_never_ranked_cheaper_per_work_hour_than_its_spec_prior_allows(tmp_path: Path,
                                                                                  table: dict[str, float] | None) -> None:
    """Defect: with no measured speeds every GPU model counted 1.0, so an L4 node showed $0.15 per work-hour
    against $0.55 for an A100 node: the slowest GPU looked 4x the best buy."""
    from spotgpu.catalogue import spec_prior

    project = _project(tmp_path, "l4", lambda c: _l4_and_a100(c, table))
    done = _cli("cost", "--stack", "l4", "--program", str(project), "--pool", "train-gcp", "--json")
    assert done.returncode == 0, done.stderr
    same_pool = next(r for r in json.loads(done.stdout)["rungs"] if r["kind"] == "same_pool")
    rows = {t["gpuModel"]: t for t in same_pool["types"]}
    l4, a100 = rows["L4"], rows["A100 40GB"]
    prior = spec_prior("L4", "A100 40GB")
    assert prior is not None and prior.speed < 0.5
    assert l4["speed"] == pytest.approx(prior.speed, abs=1e-3) and l4["speedSource"] == "spec prior"
    assert "spec prior" in l4["speedBasis"] and l4["speed"] != 1.0
    assert a100["speed"] == 1.0
    # per unit of work: the L4 node's price over 4 GPUs at the prior, never below the A100's at the same spot price
    assert l4["usdPerWorkHour"] == pytest.approx(l4["usdPerNodeHour"] / (4 * prior.speed), rel=1e-3)
    assert l4["usdPerWorkHour"] > a100["usdPerWorkHour"]
    text = _cli("cost", "--stack", "l4", "--program", str(project), "--pool", "train-gcp").stdout
    assert re.search(r"g2-standard-48 +4 x L4 +0\.193 spec prior", text), text


def test_a_pinned_speed_wins_over_the_prior(tmp_path: Path) -> None:
    project = _project(tmp_path, "pin", lambda c: _l4_and_a100(c, {"A100": 1.0, "L4": 0.3}))
    done = _cli("cost", "--stack", "pin", "--program", str(project), "--pool", "train-gcp", "--json")
    rows = {t["gpuModel"]: t for r in json.loads(done.stdout)["rungs"] for t in r["types"]}
    assert (rows["L4"]["speed"], rows["L4"]["speedSource"]) == (0.3, "typed")


def test_the_spec_table_names_a_source_for_every_row_and_covers_the_catalogues_models() -> None:
    from spotgpu import catalogue

    doc = catalogue.document("gpus")
    assert doc["asOf"] and doc["note"]
    for model, row in doc["models"].items():
        assert row["denseTflops"] > 0 and row["memoryGBps"] > 0 and len(row["source"]) > 20, model
    shapes = [catalogue.aws_gpu(t) for t in catalogue.aws_gpu_types()]
    shapes += [catalogue.gcp_machine(t) for t in catalogue.document("gcp")["machineTypes"]]
    shapes += [catalogue.azure_size(t) for t in catalogue.azure_sizes()]
    missing = {s.gpu_model for s in shapes if s and catalogue.gpu_spec(s.gpu_model, s.gpu_memory_gib) is None}
    assert missing <= set(doc["notInTable"]), missing  # every gap is said, with why


def test_simulate_has_one_unit_per_column_for_every_policy_and_a_goodput() -> None:
    """Defect: the baselines' hours were hours of the job, the ladder's node-hours: for the 2-node prod job the
    ladder showed more on-demand hours than on-demand only while it cost less."""
    done = _cli("simulate", "--stack", "prod", "--pool", "train-aws", "--trace-group", "1-node/aws-02-15-2023",
                "--max-starts", "2", "--start-every-hours", "240", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    group = json.loads(done.stdout)["groups"][0]
    assert "gangAssumption" in group and "node-hours" in group["units"]["capacity"]
    job = json.loads(done.stdout)["job"]
    spot, od = job["spotPerHour"], job["onDemandPerHour"]
    for row in group["rows"]:
        assert {"spotNodeHours", "onDemandNodeHours", "idleJobHours", "lostWorkJobHours", "goodput"} <= set(row)
        billed = row["spotNodeHours"] * spot + row["onDemandNodeHours"] * od  # the bill, in one unit for all
        assert billed == pytest.approx(row["meanCostUsd"], rel=0.03), row
        assert 0 < row["goodput"] <= 1.0
    only = next(r for r in group["rows"] if r["policy"] == "on-demand only")
    assert only["onDemandNodeHours"] >= job["workHours"] * job["nodes"]
    table = _cli("simulate", "--stack", "prod", "--pool", "train-aws", "--trace-group", "1-node/aws-02-15-2023",
                 "--max-starts", "1", "--start-every-hours", "240").stdout  # fmt: skip
    assert "spot node-h" in table and "OD node-h" in table and "idle job-h" in table and "goodput" in table
    assert "a zone that held the probe is taken to hold the gang of 2" in table


def test_cost_prints_the_models_hours_in_simulates_units() -> None:
    doc = json.loads(_cli("cost", "--profile", "tests/economics/data/llm-finetune.yaml", "--json").stdout)
    hours = doc["hours"]
    assert {"spotNodeHours", "onDemandNodeHours", "idleJobHours", "lostWorkJobHours", "goodput"} == set(hours)
    work = 36 * 2
    assert hours["spotNodeHours"] + hours["onDemandNodeHours"] > work and 0 < hours["goodput"] < 1
    assert hours["goodput"] == pytest.approx(work / (hours["spotNodeHours"] + hours["onDemandNodeHours"]), rel=1e-3)


def test_a_ladder_whose_ceilings_are_below_the_prices_is_an_error_for_cost_and_simulate_too(tmp_path: Path) -> None:
    """Issue 31 ("one rule, two answers"): `cost --profile P --ladder L` called such a ladder SPOT-ELIGIBLE where
    the preview refused the same rungs."""
    ladder = tmp_path / "low.yaml"
    ladder.write_text(yaml.safe_dump({"steps": [
        {"kind": "same_pool", "maxWaitSeconds": 900, "costCeilingPerHour": 1.0},
        {"kind": "on_demand", "maxWaitSeconds": 900, "costCeilingPerHour": 3.0}]}))  # fmt: skip
    for command in ("cost", "simulate"):
        done = _cli(command, "--profile", "tests/economics/data/llm-finetune.yaml", "--ladder", str(ladder))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"{ladder}: steps[0].costCeilingPerHour 1 is below" in done.stderr and "spot price 2.2" in done.stderr
        assert "fix: raise it to at least 2.2" in done.stderr and "SPOT-ELIGIBLE" not in done.stdout


def _old_training_ladder(config: dict[str, Any]) -> None:
    """The ladder prod shipped with: an alternate_sku rung on every pool."""
    config["spotgpu:ladders"]["training-aws"]["steps"].insert(
        2, {"kind": "alternate_sku", "maxWaitSeconds": 1200, "costCeilingPerHour": 4.5})


def test_an_alternate_sku_rung_that_takes_no_type_of_its_pool_is_an_error_unless_stated(tmp_path: Path) -> None:
    """Issue 31 ("one rule, two answers"), issue 35: the prod template's alternate_sku rung took no type of the AWS
    pool (an Auto Scaling group grows every type in its primary group) and previewed with rc 0, no warning."""
    project = _project(tmp_path, "sku", _old_training_ladder)
    for args in (("preview", "--program", str(project), "--stack", "sku", "--no-policy"),
                 ("cost", "--stack", "sku", "--program", str(project), "--pool", "train-aws"),
                 ("simulate", "--stack", "sku", "--program", str(project), "--pool", "train-aws")):  # fmt: skip
        done = _cli(*args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "spotgpu:ladders.training-aws.steps[2].kind: alternate_sku takes no type of this pool" in done.stderr
        assert "optOut.idleRungs" in done.stderr

    def stated(config: dict[str, Any]) -> None:
        _old_training_ladder(config)
        config["spotgpu:pools"][0]["optOut"] = {"idleRungs": "the ladder is shared with a pool of scale sets"}

    project = _project(tmp_path / "s", "stated", stated)
    done = _cli("preview", "--program", str(project), "--stack", "stated", "--no-policy")
    assert done.returncode == 0, done.stderr
    assert "WARNING: ladder training-aws steps[2]: alternate_sku takes no type of this pool" in done.stdout


def test_a_figure_measured_from_telemetry_names_the_files_and_samples(tmp_path: Path) -> None:
    from test_spot_price_telemetry import BASE, G5_MEDIAN, aws_history

    prices = tmp_path / "aws-spot-prices.json"
    prices.write_text(json.dumps(aws_history()))
    done = _cli("cost", "--profile", str(BASE), "--telemetry", str(prices), "--sku", "g5.12xlarge", "--json")
    assert done.returncode == 0, done.stderr
    spot = json.loads(done.stdout)["figures"]["prices"]["spotPerHour"]
    assert spot["value"] == G5_MEDIAN and spot["kind"] == "measured"
    assert "g5.12xlarge's 15 price(s)" in spot["from"] and str(prices) in spot["from"]


def test_a_figure_fitted_on_another_clouds_traces_says_it_stands_in() -> None:
    """Audit of issue 35 ("every figure says where it came from"): the prod workload is fitted on AWS
    traces and shared by the GCP and Azure pools, whose figures named the AWS traces as if their own."""
    from spotgpu.economics.report import figure_sources, flat_figures, load_stack

    config = load_stack("prod", REPO)
    for pool in config.pools:
        fitted = {k: f["from"] for k, f in flat_figures(figure_sources(config, pool)).items() if f["kind"] == "fitted"}
        assert fitted, pool.name
        for key, where in fitted.items():
            said = "[aws traces: a stand-in for " in where
            assert said == (pool.cloud != "aws"), (pool.name, key, where)
            assert not said or where.endswith(f"a stand-in for {pool.cloud}]")
