"""Property: however a stack file is broken, the preview's config edge answers in one line.

Mutated versions of the dev and prod stacks (types swapped, keys dropped, renamed
or duplicated, YAML broken) go through :func:`spotgpu_pulumi.offline.validate.plan_stack_file`,
the very path ``spotgpu preview`` runs before the mock runtime, in-process. The
result is always "valid" (exit 0) or one :class:`ConfigError` line (exit 2), never
another exception. The number of examples is bounded so this stays fast.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotgpu.config import ConfigError
from spotgpu_pulumi.offline.validate import plan_stack_file

REPO = Path(__file__).resolve().parents[2]
STACKS = {name: (REPO / "stacks" / f"Pulumi.{name}.yaml").read_text() for name in ("dev", "prod")}
DOCS = {name: yaml.safe_load(text) for name, text in STACKS.items()}

#: Values of every YAML type, swapped in for whatever was there.
SWAPS: list[Any] = [None, 0, 1, -1, 2.5, -1.5, 10**12, "", "x", "us-central1-a", True, False, [], [1], ["a", "b"],
                    {}, {"a": 1}, {"name": "x"}, [{}], [{"cloud": "aws"}]]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    node = doc
    for part in path[:-1]:
        node = node[part]
    return node


def exit_code(text: str) -> tuple[int, str]:
    """What ``spotgpu preview`` would exit with on this stack text, after its config edge."""
    try:
        plan_stack_file("stacks/Pulumi.mutant.yaml", text)
    except ConfigError as err:
        return 2, str(err)
    return 0, ""


def _assert_one_line(code: int, message: str) -> None:
    assert code in (0, 1, 2)
    if code == 2:
        assert message and "\n" not in message, message
        assert "Traceback" not in message
        assert "fix:" in message, message


@st.composite
def tree_mutants(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(sorted(DOCS)))
    doc = copy.deepcopy(DOCS[name])
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        key = path[-1]
        op = draw(st.sampled_from(["swap", "drop", "rename", "duplicate"]))
        if op == "swap":
            parent[key] = copy.deepcopy(draw(st.sampled_from(SWAPS)))
        elif op == "drop":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            new = draw(st.sampled_from([key + "s", key[:-1], key.upper(), key.replace(":", ""), "extraThing"]))
            parent[new] = parent.pop(key)
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))  # a second pool, step or subnet just like this one
        elif op == "duplicate":
            # The value pasted under a sibling key too (YAML-level duplicate keys: see text_mutants' dup-line).
            sibling = draw(st.sampled_from(sorted(parent, key=str)))
            parent[sibling] = copy.deepcopy(parent[key])
    return yaml.safe_dump(doc, sort_keys=False)


@st.composite
def text_mutants(draw: st.DrawFn) -> str:
    text = STACKS[draw(st.sampled_from(sorted(STACKS)))]
    lines = text.splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    op = draw(st.sampled_from(["tab", "bracket", "truncate", "dup-line", "colon", "dedent", "quote"]))
    if op == "tab":
        lines[i] = "\t" + lines[i].lstrip(" ")
    elif op == "bracket":
        lines[i] += " ["
    elif op == "truncate":
        lines = [*lines[:i], lines[i][:draw(st.integers(0, max(0, len(lines[i]) - 1)))]]
    elif op == "dup-line":
        lines.insert(i, lines[i])
    elif op == "colon":
        lines[i] = lines[i].replace(": ", ":: ", 1)
    elif op == "dedent":
        lines[i] = lines[i].lstrip(" ")
    elif op == "quote":
        lines[i] += ' "'
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", sorted(STACKS))
def test_shipped_stacks_are_valid(name: str) -> None:
    assert exit_code(STACKS[name]) == (0, "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree_mutants())
def test_tree_mutations_answer_in_one_line(text: str) -> None:
    _assert_one_line(*exit_code(text))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_mutants())
def test_broken_yaml_answers_in_one_line(text: str) -> None:
    _assert_one_line(*exit_code(text))


def test_duplicate_key_is_an_error_not_a_silent_override() -> None:
    text = STACKS["dev"].replace("  spotgpu:owner: ml-platform\n", "  spotgpu:owner: ml-platform\n  spotgpu:owner: x\n")
    code, message = exit_code(text)
    assert code == 2 and "key is given twice" in message and '"spotgpu:owner"' in message
