"""The offline harness configures and runs the pack the way the engine does."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import raw_resources as raw
from guard_helpers import EXPECTED_DEFAULTS, PACK_DIR, REPO, by_policy, judge, pack, record_preview

from spotgpu_pulumi.offline.policy_harness import PolicyConfigError, analyze, load_pack, resolve_config
from spotgpu_pulumi.offline.program import ProgramError

#: One pool breaking a mandatory rule (no rebalance) and an advisory one (one zone, one type).
BROKEN = partial(raw.aws_pool, capacity_rebalance=False, subnets=["subnet-0a1b2c3d4e5f60001"], types=["g5.xlarge"])


def test_pack_loads_from_main_with_every_rule_at_its_default_level() -> None:
    loaded = pack()
    assert loaded.name == "spotgpu-guard"
    assert loaded.version == "0.1.0"  # from PulumiPolicy.yaml, as the CLI reads it
    assert {p.name: loaded.default_level(p).value for p in loaded.policies} == EXPECTED_DEFAULTS


def test_resolve_config_applies_all_then_per_policy_then_schema_defaults() -> None:
    resolved = resolve_config(pack(), {"all": "advisory", "notice-handled": {"enforcementLevel": "mandatory"}})
    assert resolved["spot-gpu-requires-checkpoint"][0].value == "advisory"
    assert resolved["notice-handled"] == (resolved["notice-handled"][0], {"zeroNoticeWaivers": {}})
    assert resolved["notice-handled"][0].value == "mandatory"
    assert resolved["capacity-diversified"][1] == {"minZones": 2, "minTypes": 2}


def test_levels_from_config_reach_the_diagnostics() -> None:
    default = judge(BROKEN)
    assert {d["level"] for d in by_policy(default, "notice-handled")} == {"mandatory"}
    assert {d["level"] for d in by_policy(default, "capacity-diversified")} == {"advisory"}
    flipped = judge(BROKEN, {"notice-handled": "advisory", "capacity-diversified": "mandatory"})
    assert {d["level"] for d in by_policy(flipped, "notice-handled")} == {"advisory"}
    assert {d["level"] for d in by_policy(flipped, "capacity-diversified")} == {"mandatory"}


def test_disabled_policies_do_not_run() -> None:
    assert judge(BROKEN, {"all": "disabled"}) == []
    only = judge(BROKEN, {"all": "disabled", "notice-handled": "mandatory"})
    assert {d["policy"] for d in only} == {"notice-handled"}


def test_config_properties_change_a_rule() -> None:
    wide = partial(raw.aws_pool, subnets=["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"])
    assert by_policy(judge(wide), "capacity-diversified") == []
    assert by_policy(judge(wide, {"capacity-diversified": {"minZones": 3}}), "capacity-diversified")


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"notice-handeld": "mandatory"}, "not in pack spotgpu-guard"),
        ({"all": "strict"}, "enforcement level 'strict' is unknown"),
        ({"capacity-diversified": {"minZones": 0}}, "capacity-diversified.minZones"),
        ({"capacity-diversified": {"minZone": 3}}, "properties of capacity-diversified"),
        ({"notice-handled": {"zeroNoticeWaivers": {"p": "short"}}}, "zeroNoticeWaivers.p"),
    ],
)
def test_invalid_policy_config_is_refused_with_the_fix(config: dict, fragment: str) -> None:
    with pytest.raises(PolicyConfigError, match="fix:") as err:
        resolve_config(pack(), config)
    assert fragment in str(err.value)


def test_analyze_reads_the_repository_policy_config() -> None:
    resources = record_preview(BROKEN)
    diagnostics = analyze(resources, PACK_DIR, REPO / "policy-config.json")
    assert {(d["policy"], d["level"]) for d in diagnostics} >= {
        ("notice-handled", "mandatory"), ("capacity-diversified", "advisory")}
    assert all(d["urn"].startswith("urn:pulumi:") for d in diagnostics)
    assert not any(d["message"].startswith("Spot pools act on") for d in diagnostics), "description prefix stripped"


def test_a_broken_pack_is_reported_not_crashed(tmp_path: Path) -> None:
    (tmp_path / "PulumiPolicy.yaml").write_text("runtime: python\nversion: 0.0.1\n")
    (tmp_path / "__main__.py").write_text("import no_such_rules_module\n")
    with pytest.raises(ProgramError, match="failed to load: ModuleNotFoundError"):
        load_pack(tmp_path)
