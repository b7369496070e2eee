"""The contract's field readers (``spotgpu.contract.fields``): one reader per JSON type, one error line.

Audit of issue 34: notice.py (``_text``, ``_time``), agent_status.py (``_get``) and the checkpoint
report's ``from_json`` each read fields by hand, with their own words for the same mistake
(``committed must be true or false``, ``startedAt 'noon': use epoch seconds``, a NaN start time
read as a time). Now every ``from_json`` of those documents reads through these.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spotgpu.contract import fields
from spotgpu.contract.notice import Checkpoint

REPO = Path(__file__).resolve().parents[2]
DOC: dict[str, Any] = {"s": "x", "n": 2.5, "i": 3, "b": True, "o": {"k": 1}, "l": [1, 2], "null": None}


@pytest.mark.parametrize(
    ("read", "value", "message"),
    [
        (lambda d: fields.number(d, "v", "doc"), True, "doc.v: not a number (value: True)"),
        (lambda d: fields.number(d, "v", "doc"), math.nan, "doc.v: not a number (value: nan)"),
        (lambda d: fields.number(d, "v", "doc"), -math.inf, "doc.v: not a number (value: -inf)"),
        (lambda d: fields.number(d, "v", "doc"), 10**400, f"doc.v: not a number (value: {10**400!r})"),
        (lambda d: fields.number(d, "v", "doc", above=0, fix="use more"), 0,
         "doc.v: not a finite number above 0 (value: 0); fix: use more"),
        (lambda d: fields.number(d, "v", "doc", least=0), -0.5, "doc.v: not a number of at least 0 (value: -0.5)"),
        (lambda d: fields.choice(d, "v", "doc", Checkpoint, fix="ask"), "later",
         "doc.v: not one of early, final (value: 'later'); fix: ask"),
        (lambda d: fields.epoch(d, "v", "doc"), "noon", "doc.v: not a time in epoch seconds (value: 'noon')"),
        (lambda d: fields.whole(d, "v", "doc"), False, "doc.v: not a whole number (value: False)"),
        (lambda d: fields.whole(d, "v", "doc"), 2.0, "doc.v: not a whole number (value: 2.0)"),
        (lambda d: fields.whole(d, "v", "doc", least=1), 0, "doc.v: not a whole number of at least 1 (value: 0)"),
        (lambda d: fields.flag(d, "v", "doc"), 1, "doc.v: not true or false (value: 1)"),
        (lambda d: fields.text(d, "v", "doc"), 7, "doc.v: not a string (value: 7)"),
        (lambda d: fields.mapping(d, "v", "doc"), [], "doc.v: not a JSON object (value: [])"),
        (lambda d: fields.items(d, "v", "doc", wanted="a list of ranks", of=int), [1, True],
         "doc.v: not a list of ranks (value: [1, True])"),
    ],
)  # fmt: skip
def test_a_value_of_the_wrong_kind_is_one_line_naming_the_field_and_the_value(
    read: Any, value: Any, message: str
) -> None:
    with pytest.raises(ValueError) as err:
        read({"v": value})
    assert str(err.value) == message


def test_absent_and_null_read_the_same_and_a_required_field_says_so() -> None:
    for key in ("missing", "null"):
        assert fields.text(DOC, key, "doc") is None and fields.number(DOC, key, "doc") is None
        assert fields.whole(DOC, key, "doc") is None and fields.items(DOC, key, "doc") is None
        with pytest.raises(ValueError, match=rf"^doc\.{key}: not a time in epoch seconds \(value: None\)$"):
            fields.epoch(DOC, key, "doc", required=True)
        with pytest.raises(ValueError, match=rf"^doc\.{key}: not true or false \(value: None\)$"):
            fields.flag(DOC, key, "doc")
    with pytest.raises(ValueError, match=r"^doc: not a JSON object \(value: \[1\]\)$"):
        fields.document([1], "doc")


def test_numbers_read_back_as_plain_floats_and_ints_numpy_scalars_too() -> None:
    doc = {"f": np.float32(0.25), "i": np.int64(8), "n": 3}
    assert (fields.number(doc, "f", "d"), fields.whole(doc, "i", "d"), fields.number(doc, "n", "d")) == (0.25, 8, 3.0)
    assert type(fields.number(doc, "f", "d")) is float and type(fields.whole(doc, "i", "d")) is int


def _hand_checks(tree: ast.AST) -> list[int]:
    """Lines with an ``isinstance(x, bool)`` or ``isfinite`` call: a field read by hand."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "isinstance" and len(node.args) == 2
         and isinstance(node.args[1], ast.Name) and node.args[1].id == "bool")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "isfinite"))]  # fmt: skip


@pytest.mark.parametrize("module", ["notice.py", "agent_status.py", "checkpoint_report.py", "throughput.py"])
def test_the_documents_read_their_fields_through_the_readers(module: str) -> None:
    tree = ast.parse((REPO / "spotgpu" / "contract" / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # WorkloadSnapshot.version_of reads the version leniently, on purpose
        if isinstance(node, ast.FunctionDef) and node.name == "version_of":
            node.body = []
    assert _hand_checks(tree) == []
    assert _hand_checks(ast.parse("isinstance(v, bool)\nmath.isfinite(v)\nisinstance(v, int)")) == [1, 2]
