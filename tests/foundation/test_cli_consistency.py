"""The whole ``spotgpu`` parser tree follows one set of flag rules (``spotgpu.cliutil``).

The walk covers every command of every area, so a new flag that spells a known concept
differently (``--poll`` for ``--poll-seconds``) fails here, in whichever area it is added.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from spotgpu.cli import COMMANDS, build_parser
from spotgpu.cliutil import CANONICAL_FLAGS, DEPRECATED_ALIASES

#: Spellings of a concept that already has a canonical flag (CANONICAL_FLAGS); never visible.
NON_CANONICAL = {
    **DEPRECATED_ALIASES,
    "--poll-interval": "--poll-seconds",
    "--interval-seconds": "--poll-seconds",
    "--wait": "--timeout-seconds",
    "--grace": "--grace-seconds",
    "--dryrun": "--dry-run",
    "--noop": "--dry-run",
    "--output-json": "--json",
    "--format": "--json",
    "--config-file": "--config",
    "--cfg": "--config",
}
#: A number flag whose name says "time" must say its unit too.
TIME_WORDS = re.compile(r"(poll|timeout|grace|wait|delay|period|ttl|interval|every|age)")
UNIT_SUFFIX = re.compile(r"-(seconds|minutes|hours|days)$")

#: Leaf commands that report nothing a script would parse, so need no --json.
NO_REPORT = {
    "spotgpu agent run": "the daemon; its events log is already JSON lines",
    "spotgpu gang run": "a supervisor: stdout is torchrun's and the job's, one line per epoch on stderr",
    "spotgpu gang store": "a server",
}
#: The areas this test holds to every rule, including help text on every flag.
STRICT_AREAS = ("spotgpu ckpt", "spotgpu agent", "spotgpu drill", "spotgpu cost", "spotgpu simulate", "spotgpu controller")


def leaves(parser: argparse.ArgumentParser, path: str = "spotgpu") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from leaves(child, f"{path} {name}")


def options(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action, bool]]:
    """(option string, action, visible in --help) for every option of a leaf."""
    for action in parser._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                yield option, action, action.help != argparse.SUPPRESS


TREE = dict(leaves(build_parser()))


def test_the_tree_is_the_whole_cli() -> None:
    """Every command of the static table is registered by its module, and nothing else is."""
    top = {path.split()[1] for path in TREE}
    assert top == set(COMMANDS)
    assert len(TREE) >= 15  # ckpt x3, agent x3, controller x3, drill x3, preview, cost, simulate


def spelling_problems(path: str, parser: argparse.ArgumentParser) -> list[str]:
    problems = []
    for option, action, visible in options(parser):
        if visible:
            if option in NON_CANONICAL:
                problems.append(f"{path}: {option} should be {NON_CANONICAL[option]}")
            if "_" in option:
                problems.append(f"{path}: {option}: flags are kebab-case")
            numeric = action.type in (int, float)
            if numeric and option.startswith("--") and TIME_WORDS.search(option) and not UNIT_SUFFIX.search(option):
                problems.append(f"{path}: {option} takes a duration; name its unit (-seconds)")
            continue
        canonical = DEPRECATED_ALIASES.get(option)
        if not canonical:
            problems.append(f"{path}: hidden {option} is not a registered deprecated alias (cliutil.DEPRECATED_ALIASES)")
        elif canonical not in parser._option_string_actions:
            problems.append(f"{path}: {option} aliases {canonical}, which is missing")
        elif action.dest != parser._option_string_actions[canonical].dest:
            problems.append(f"{path}: {option} does not store into {canonical}'s dest")
    return problems


@pytest.mark.parametrize("path", sorted(TREE))
def test_flag_spellings_are_canonical(path: str) -> None:
    assert spelling_problems(path, TREE[path]) == []


def test_the_spelling_rules_catch_the_old_mistakes() -> None:
    bad = argparse.ArgumentParser()
    bad.add_argument("--poll", type=float, help="x")
    bad.add_argument("--grace-period", type=float, help="x")
    bad.add_argument("--dry_run", action="store_true", help="x")
    bad.add_argument("--stale", dest="poll", help=argparse.SUPPRESS)
    problems = "\n".join(spelling_problems("spotgpu bad", bad))
    assert "--poll should be --poll-seconds" in problems
    assert "--grace-period takes a duration" in problems
    assert "--dry_run: flags are kebab-case" in problems
    assert "hidden --stale is not a registered deprecated alias" in problems


@pytest.mark.parametrize("path", sorted(TREE))
def test_every_reporting_command_takes_json(path: str) -> None:
    flags = {option for option, _, visible in options(TREE[path]) if visible}
    if path in NO_REPORT:
        return
    assert "--json" in flags, f"{path} reports something: give it --json (cliutil.add_json_flag)"


@pytest.mark.parametrize("path", sorted(p for p in TREE if p.startswith("spotgpu drill ") and p != "spotgpu drill local"))
def test_every_drill_has_the_same_core_flags(path: str) -> None:
    flags = {option for option, _, visible in options(TREE[path]) if visible}
    assert {"--pool", "--dry-run", "--json", "--poll-seconds", "--timeout-seconds"} <= flags


@pytest.mark.parametrize("path", sorted(p for p in TREE if p.startswith(STRICT_AREAS)))
def test_every_visible_argument_has_help(path: str) -> None:
    for action in TREE[path]._actions:
        if action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
            assert action.help, f"{path}: {action.option_strings or action.dest} has no help text"


def test_canonical_table_has_one_spelling_per_concept() -> None:
    spellings = list(CANONICAL_FLAGS.values())
    assert len(spellings) == len(set(spellings))
    assert set(DEPRECATED_ALIASES.values()) <= set(spellings)


def test_the_local_drill_has_the_drills_json_and_timeout() -> None:
    """``drill local`` hits no pool (so no --pool/--dry-run/--poll-seconds), but reports like the others."""
    flags = {option for option, _, visible in options(TREE["spotgpu drill local"]) if visible}
    assert {"--json", "--timeout-seconds"} <= flags
