"""Every wire agreement has one address (issue 34, item 1): spotgpu.contract, round-tripped.

The record kinds are collected from the code paths, not listed here: the producers' source
(everything under ``spotgpu/`` but the contract) is read for the record classes it builds, and
every kind the contract declares must be built somewhere (no dead kind), every class built must
be a declared kind (no record written around the contract), and each one must come back equal
from the JSON line its producer writes. Defects: the agent wrote its records as free keyword
lists the reader matched by name (it read a ``bytes`` no producer wrote); the controller typed an
event's kind as a free ``str`` whose comment listed 10 kinds while it emitted 17; ``SCHEMA_VERSION``
was defined and never written; the notice document was a dict read back by key in three places;
the throughput body was built and checked in the client and checked again, in other words, by the agent.
"""

from __future__ import annotations

import ast
import json
import math
import typing
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotgpu.contract import agent_records, controller_events
from spotgpu.contract.agent_records import AGENT_RECORDS, AgentRecord, agent_line, read_agent_line
from spotgpu.contract.controller_events import EVENTS, Event, EventFields
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import Checkpoint, ClearedNotice, NoticeDocument
from spotgpu.contract.telemetry import SCHEMA_VERSION, VERSION_KEY, Fields, field_types
from spotgpu.contract.throughput import ARGUMENTS, MAX_GPU_MODEL_CHARS, ThroughputReport

REPO = Path(__file__).resolve().parents[2]
RECORD_CLASSES: dict[str, type[Fields]] = {c.__name__: c for c in (*AGENT_RECORDS.values(), *EVENTS.values())}


def _built(tree: ast.AST) -> Iterator[str]:
    """Names of record classes a module builds: ``Notice(...)``, ``WorkloadNotified.of(...)``, ``Identity.from_fields(...)``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("of", "from_fields") and isinstance(func.value, ast.Name):
            func = func.value
        if isinstance(func, ast.Name) and func.id in RECORD_CLASSES:
            yield func.id


def produced() -> dict[str, list[str]]:
    """Record class -> the producer modules that build it (the contract's own code left out)."""
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "spotgpu").rglob("*.py")):
        if (REPO / "spotgpu" / "contract") in path.parents:
            continue
        for name in set(_built(ast.parse(path.read_text(encoding="utf-8")))):
            found.setdefault(name, []).append(str(path.relative_to(REPO)))
    return found


def test_every_declared_kind_is_produced_and_every_produced_record_is_declared() -> None:
    made = produced()
    assert sorted(set(RECORD_CLASSES) - set(made)) == []  # a kind no producer writes is dead
    assert set(AGENT_RECORDS) == set(agent_records.AgentRecordKind)  # one class per kind, both ways
    assert set(EVENTS) == set(controller_events.ControllerEventKind)


def test_the_collector_finds_what_a_producer_builds() -> None:
    tree = ast.parse("Notice(kind=k)\nx = WorkloadNotified.of(p, n, t)\nIdentity.from_fields(labels)\nNotice\nfoo(1)")
    assert sorted(_built(tree)) == ["Identity", "Notice", "WorkloadNotified"]


# -- every kind round-trips through the JSON its producer writes -------------------------------

_JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))  # fmt: skip
_JSON = st.recursive(_JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                     st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)  # fmt: skip


def strategy(kind: Any) -> st.SearchStrategy[Any]:
    """Values of a field's type, as JSON can carry them."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, UnionType):
        return st.one_of(*(strategy(a) for a in args))
    if kind is type(None):
        return st.none()
    if isinstance(kind, type) and issubclass(kind, Enum):
        return st.sampled_from(list(kind))
    if kind is bool:
        return st.booleans()
    if kind is int:
        return st.integers(-(2**40), 2**40)
    if kind is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind is str:
        return st.text(max_size=12)
    if origin is list:
        return st.lists(strategy(args[0]), max_size=3)
    if origin is dict or kind is Any:
        return st.dictionaries(st.text(min_size=1, max_size=6).map(lambda k: f"x-{k}"), _JSON, max_size=3) \
            if origin is dict else _JSON  # fmt: skip
    raise AssertionError(f"no strategy for {kind!r}: give the contract's field a JSON type")


def record_of(cls: type[Fields]) -> st.SearchStrategy[Fields]:
    hints = field_types(cls)
    fields = {name: strategy(t) for name, t in hints.items() if typing.get_origin(t) is not typing.ClassVar}
    return st.fixed_dictionaries(fields).map(lambda values: cls(**values))


def _wire(line: dict[str, Any]) -> dict[str, Any]:
    """The line as a reader gets it: written as the producers write it, parsed back."""
    loaded: dict[str, Any] = json.loads(json.dumps(line, default=str, sort_keys=True))
    return loaded


@pytest.mark.parametrize("name", sorted(produced()))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_produced_record_kind_round_trips(name: str, data: st.DataObject) -> None:
    cls = RECORD_CLASSES[name]
    record = data.draw(record_of(cls))
    if isinstance(record, AgentRecord):
        line = _wire(agent_line(record, 1_800_000_000.25))
        assert line[VERSION_KEY] == SCHEMA_VERSION and line["record"] == record.KIND.value
        assert read_agent_line(line) == record
    else:
        assert isinstance(record, EventFields)
        event = Event.of("pool-a", 1_800_000_000.5, record)
        line = _wire(event.to_json())
        assert line[VERSION_KEY] == SCHEMA_VERSION and line["kind"] == record.KIND.value
        assert Event.from_json(line) == event


@pytest.mark.parametrize(
    "line",
    [
        agent_line(agent_records.Drained(hook_exit=0), 1.0),
        Event.of("p", 1.0, controller_events.Resumed()).to_json(),
    ],
)
def test_the_schema_version_is_written_and_a_line_of_another_is_refused(line: dict[str, Any]) -> None:
    assert line[VERSION_KEY] == SCHEMA_VERSION
    reader = read_agent_line if "record" in line else Event.from_json
    with pytest.raises(ValueError, match=r"^v: telemetry schema version 2; .*fix: "):
        reader({**line, VERSION_KEY: 2})
    older = {k: v for k, v in line.items() if k != VERSION_KEY}  # written before the version was
    assert reader(older) == reader(line)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("pool", None, r"^resumed\.pool: not a string \(value: None\)$"),
        ("pool", 7, r"^resumed\.pool: not a string \(value: 7\)$"),
        ("at", True, r"^resumed\.at: not a time in epoch seconds \(value: True\)$"),
        ("at", math.nan, r"^resumed\.at: not a time in epoch seconds \(value: nan\)$"),
        ("at", "noon", r"^resumed\.at: not a time in epoch seconds \(value: 'noon'\)$"),
    ],
)
def test_a_controller_line_without_its_pool_or_time_is_one_line_naming_the_key(key: str, value: object, message: str) -> None:
    """Defect: the line read its pool and time by hand (``needs its pool and its time at``), untested, and
    took a NaN time; they read through the contract's field readers like every other key."""
    line = Event.of("p", 1.0, controller_events.Resumed()).to_json()
    with pytest.raises(ValueError, match=message):
        Event.from_json({**line, key: value})


def test_a_field_the_kind_does_not_declare_is_refused_with_its_name() -> None:
    line = agent_line(agent_records.Ready(stage="workload", boot_to_ready_seconds=3.0), 1.0)
    with pytest.raises(ValueError, match=r"^ready\.bootSeconds: not a field of a ready record"):
        read_agent_line({**line, "bootSeconds": 3.0})


# -- the notice document ------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    deadline=st.one_of(st.none(), st.floats(1e9, 2e9)),
    margin=st.floats(0, 300),
    now=st.floats(1e9, 2e9),
    kind=st.sampled_from(list(InterruptionKind)),
    checkpoint=st.sampled_from(list(Checkpoint)),
)
def test_the_notice_document_round_trips_and_its_budget_is_one_rule(
    deadline: float | None, margin: float, now: float, kind: InterruptionKind, checkpoint: Checkpoint
) -> None:
    notice = NoticeDocument.told("e-1", kind, "aws/imds", checkpoint, 1.5e9, deadline, margin)
    served = _wire(notice.to_json(now))
    assert NoticeDocument.from_json(served) == notice
    budget = served["budgetSeconds"]
    assert budget == (None if deadline is None else max(0.0, deadline - margin - now))
    assert notice.budget_seconds(now) == (budget or 0.0)
    env = notice.hook_environment(now)
    assert env["SPOTGPU_EVENT_ID"] == "e-1" and env["SPOTGPU_CHECKPOINT"] == checkpoint.value
    assert env["SPOTGPU_BUDGET_SECONDS"] == ("" if budget is None else f"{budget:.3f}")
    cleared = ClearedNotice.of(notice, now)
    assert ClearedNotice.from_json(_wire(cleared.to_json())) == cleared


@pytest.mark.parametrize(
    ("change", "field"),
    [({"kind": "exploded"}, "notice.kind"), ({"checkpoint": "later"}, "notice.checkpoint"),
     ({"deadline": "soon"}, "notice.deadline"), ({"eventId": 7}, "notice.eventId")],
)
def test_a_notice_document_that_is_not_one_names_the_field(change: dict[str, Any], field: str) -> None:
    doc = NoticeDocument.told("e", InterruptionKind.PREEMPT, "s", Checkpoint.FINAL, 1.0, 100.0, 15).to_json(50.0)
    with pytest.raises(ValueError, match=rf"^{field}: "):
        NoticeDocument.from_json({**doc, **change})


def test_closed_controller_values_are_their_enums_on_the_wire() -> None:
    """Audit of issue 34: a drop reason and a time basis were free strings beside the enums that name them,
    so a reader accepted any value; now a value outside the enum is one ValueError naming the field."""
    from spotgpu.contract.controller_events import EventDropped, Interruption
    from spotgpu.contract.interruptions import InterruptionKind
    from spotgpu.contract.sources import DropReason, EventTimeBasis

    read = EventDropped.from_fields({"reason": "not-json", "source": "sqs", "what": "m-1"})
    assert read.reason is DropReason.NOT_JSON
    with pytest.raises(ValueError, match="reason"):
        EventDropped.from_fields({"reason": "lost in the mail", "source": "sqs", "what": "m-1"})
    read_i = Interruption.from_fields({"type": InterruptionKind.PREEMPT.value, "timeBasis": "received"})
    assert read_i.time_basis is EventTimeBasis.RECEIVED
    with pytest.raises(ValueError, match="timeBasis"):
        Interruption.from_fields({"type": InterruptionKind.PREEMPT.value, "timeBasis": "guessed"})


def test_a_gang_stop_and_a_restore_record_read_their_values_as_the_report_enums() -> None:
    """One value set each: the telemetry records take the report's enums (they were free strings)."""
    from spotgpu.contract.agent_records import GangStop, Restored
    from spotgpu.contract.checkpoint_report import GangOutcome, GangRole, RestoreSource

    stop = GangStop.from_fields({"checkpoint": "gang", "committed": True, "role": "peer", "outcome": "peer-lost"})
    assert (stop.role, stop.outcome) == (GangRole.PEER, GangOutcome.PEER_LOST)
    assert Restored.from_fields({"source": "peer"}).source is RestoreSource.PEER
    for bad in ({"role": "bystander"}, {"outcome": "maybe"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            GangStop.from_fields({"checkpoint": "gang", "committed": True, **bad})
    with pytest.raises(ValueError, match="source"):
        Restored.from_fields({"source": "tape"})


# -- the throughput report ----------------------------------------------------------------------

_STEP_SECONDS = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
_GPU_MODEL = st.one_of(st.none(), st.text(min_size=1, max_size=MAX_GPU_MODEL_CHARS).map(str.strip).filter(bool))


@settings(max_examples=50, deadline=None)
@given(seconds=_STEP_SECONDS, steps=st.integers(1, 2**40), model=_GPU_MODEL)
def test_the_throughput_report_round_trips(seconds: float, steps: int, model: str | None) -> None:
    report = ThroughputReport(seconds, steps, model)
    body = _wire(report.to_json())
    assert ThroughputReport.from_json(body) == report
    assert set(body) == {"stepSeconds", "steps"} | ({"gpuModel"} if model is not None else set())  # the keys before it
    assert ThroughputReport.of(seconds, steps, model, what="report_throughput") == report


def test_an_older_throughput_body_reads_as_the_agent_before_the_contract_read_it() -> None:
    """The body without ``steps`` is the mean of one step (commit 7ce5f9e's ``control.throughput_sample``)."""
    assert ThroughputReport.from_json({"stepSeconds": 0.5}) == ThroughputReport(0.5, 1, None)
    assert ThroughputReport.from_json({"stepSeconds": 2, "steps": 10, "gpuModel": " A100 40GB\n"}) == ThroughputReport(
        2.0, 10, "A100 40GB"
    )  # whitespace round a model name is stripped, on both sides
    assert ThroughputReport.of(2, 10, "  H100 ", what="f") == ThroughputReport(2.0, 10, "H100")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"stepSeconds": True}, "throughput.stepSeconds: not a finite number above 0 (value: True)"),
        ({"stepSeconds": math.nan}, "throughput.stepSeconds: not a finite number above 0 (value: nan)"),
        ({"stepSeconds": math.inf}, "throughput.stepSeconds: not a finite number above 0 (value: inf)"),
        ({"stepSeconds": 0}, "throughput.stepSeconds: not a finite number above 0 (value: 0)"),
        ({}, "throughput.stepSeconds: not a finite number above 0 (value: None)"),
        ({"stepSeconds": 1, "steps": True}, "throughput.steps: not a whole number of at least 1 (value: True)"),
        ({"stepSeconds": 1, "steps": 2.0}, "throughput.steps: not a whole number of at least 1 (value: 2.0)"),
        ({"stepSeconds": 1, "steps": 0}, "throughput.steps: not a whole number of at least 1 (value: 0)"),
        ({"stepSeconds": 1, "gpuModel": " "}, "throughput.gpuModel: not a GPU model name of 1 to 64 characters (value: ' ')"),
        ({"stepSeconds": 1, "gpuModel": 7}, "throughput.gpuModel: not a GPU model name of 1 to 64 characters (value: 7)"),
    ],
)  # fmt: skip
def test_a_throughput_body_that_is_not_one_is_one_line_naming_the_key_the_value_and_the_fix(
    body: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as err:
        ThroughputReport.from_json(body)
    line = str(err.value)
    assert line.startswith(message + "; fix: use ") and "\n" not in line


def test_a_throughput_argument_is_named_as_the_argument_in_the_words_the_body_gets() -> None:
    """One set of rules: the client's line and the agent's line differ only in the name."""
    for seconds, steps, model in ((0, 1, None), (math.nan, 1, None), (1.0, 0, None), (1.0, 1, "x" * 65)):
        with pytest.raises(ValueError) as arg:
            ThroughputReport.of(seconds, steps, model, what="report_throughput")
        with pytest.raises(ValueError) as key:
            ThroughputReport.from_json({"stepSeconds": seconds, "steps": steps, "gpuModel": model})
        where, said = str(arg.value).split(": ", 1)
        assert where.startswith("report_throughput.") and where.split(".")[1] in ARGUMENTS
        assert str(key.value).split(": ", 1)[1] == said
    with pytest.raises(ValueError, match=r"^throughput: not a JSON object \(value: \[0\.5\]\)$"):
        ThroughputReport.from_json([0.5])


def test_a_caller_that_passes_steps_none_is_told_so_while_an_older_body_without_steps_reads_as_one() -> None:
    """``steps=None`` from a training loop is its bug (the argument defaults to 1); only the wire form may omit it."""
    with pytest.raises(ValueError, match=r"^report_throughput\.steps: not a whole number of at least 1 \(value: None\); fix: "):
        ThroughputReport.of(0.5, None, None, what="report_throughput")
    assert ThroughputReport.from_json({"stepSeconds": 0.5, "steps": None}).steps == 1
