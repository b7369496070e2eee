"""Issue 22 item 2: every marker and part is decoded by one strict model, and decoding never crashes.

The defects: a commit marker whose ``generation`` is an int or null, or whose
``world_size`` is ``"1"``, made ``ckpt verify``, ``list`` and ``gc`` print a traceback
and ``restore()`` raise; ``hash_algorithm: "md5"`` stopped verify and gc with exit 2, so
the good generations were never checked.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotgpu.checkpoint import CheckpointManager
from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.hashing import HASHERS, HEX_DIGEST_LENGTH
from spotgpu.checkpoint.manifest import decode_commit, decode_part
from spotgpu.cli import main

STEPS = (1, 2, 3)


def state(step: int) -> dict[str, Any]:
    return {"w": np.arange(6, dtype=np.float32).reshape(2, 3) + step, "s": np.array([step * 1.5]), "b": b"%d" % step}


def _fresh_store() -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="spotgpu-decode-", dir=shm if shm.is_dir() else None))


@pytest.fixture
def store() -> Iterator[Path]:
    root = _fresh_store()
    mgr = CheckpointManager(root.as_uri())
    for step in STEPS:
        mgr.save(step, state(step))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def marker(root: Path, step: int) -> Path:
    return root / "commits" / f"{step:012d}.json"


def part(root: Path, step: int) -> Path:
    return next(root.glob(f"shards/*/{step:012d}-*/part-r00000.json"))


def _cli(*args: str) -> int:
    return main(["ckpt", *args])  # a traceback would raise out of main


@pytest.mark.parametrize(
    ("field", "value"),
    [("generation", 3), ("generation", None), ("world_size", "1"), ("hash_algorithm", "md5"), ("step", 3.0)],
)
def test_the_issue_markers_fail_that_generation_and_the_rest_go_on(store: Path, field: str, value: Any, capsys) -> None:
    doc = json.loads(marker(store, 3).read_bytes())
    doc[field] = value
    marker(store, 3).write_text(json.dumps(doc))
    url = store.as_uri()
    restored = CheckpointManager(url).restore()
    assert restored is not None and restored.step == 2
    assert restored.skipped and f"field {field}" in restored.skipped[0][1]
    assert _cli("verify", url) == 1  # step 3 fails; 2 and 1 are still checked
    out = capsys.readouterr().out
    assert out.count(" OK ") == 2 and "FAILED" in out
    assert _cli("list", url) == 0
    assert _cli("gc", url, "--keep", "1", "--grace-seconds", "0") == 0
    assert CheckpointManager(url).restore().step == 2  # type: ignore[union-attr]


def test_a_zero_d_shape_decodes_to_the_empty_tuple(store: Path) -> None:
    decoded = decode_part(part(store, 3).read_bytes())
    entry = next(o for o in decoded.items if o.key == "s")
    assert entry.shape is not None
    assert json.loads(part(store, 3).read_bytes())["items"][1]["key"] in ("s", "w", "b")
    doc = json.loads(part(store, 3).read_bytes())
    for obj in doc["items"]:
        if obj["key"] == "s":
            obj["shape"] = []
            obj["size"] = 8  # one float64
    zero_d = next(o for o in decode_part(json.dumps(doc).encode()).items if o.key == "s")
    assert zero_d.shape == ()


def test_every_known_hash_has_a_digest_length() -> None:
    assert set(HASHERS) == set(HEX_DIGEST_LENGTH)


# ---- the property: mutate real markers and parts, never a traceback -----------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutation(draw: st.DrawFn) -> tuple[str, int, Any]:
    target = draw(st.sampled_from(["marker", "part"]))
    step = draw(st.sampled_from(STEPS))
    kind = draw(st.sampled_from(["set", "delete", "add", "truncate", "encoding", "flip"]))
    if kind in ("set", "delete"):
        return target, step, (kind, draw(st.integers(0, 10_000)), draw(JSON_VALUES))
    if kind == "add":
        return target, step, (kind, draw(st.text(min_size=1, max_size=6)), draw(JSON_VALUES))
    return target, step, (kind, draw(st.integers(0, 10_000)), draw(st.integers(0, 255)))


def apply(path: Path, how: tuple[Any, ...]) -> None:
    kind, n, value = how
    body = path.read_bytes()
    if kind == "truncate":
        path.write_bytes(body[: n % max(1, len(body))])
        return
    if not body:  # an earlier mutation truncated it to nothing: nothing left to corrupt
        return
    if kind == "encoding":
        path.write_bytes(body.decode(errors="replace").encode("utf-16") if n % 2 else body[: n % len(body)] + b"\xff" + body[n % len(body) :])
        return
    if kind == "flip":
        i = n % len(body)
        path.write_bytes(body[:i] + bytes([body[i] ^ (value or 1)]) + body[i + 1 :])
        return
    try:
        doc = json.loads(body)
    except ValueError:  # an earlier mutation already broke it: break it some more
        path.write_bytes(body[: len(body) // 2])
        return
    if not isinstance(doc, dict):
        path.write_bytes(b"")
        return
    if kind == "add":
        doc[n] = value
    else:
        where = _paths(doc)
        if not where:
            path.write_bytes(b"{")
            return
        loc = where[n % len(where)]
        parent = doc
        for k in loc[:-1]:
            parent = parent[k]
        if kind == "delete":
            del parent[loc[-1]]
        else:
            parent[loc[-1]] = value
    path.write_text(json.dumps(doc))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations=st.lists(mutation(), min_size=1, max_size=3))
def test_mutated_markers_and_parts_never_crash_and_the_newest_intact_is_restored(mutations: list[Any]) -> None:
    root = _fresh_store()
    try:
        mgr = CheckpointManager(root.as_uri())
        for step in STEPS:
            mgr.save(step, state(step))
        touched = set()
        for target, step, how in mutations:
            apply(marker(root, step) if target == "marker" else part(root, step), how)
            touched.add(step)
        url = root.as_uri()
        untouched = [s for s in STEPS if s not in touched]
        restored = CheckpointManager(url).restore()
        if untouched:
            assert restored is not None and restored.step >= max(untouched)
        if restored is not None:
            expected = state(restored.step)
            assert set(restored.state) == set(expected)
            for key, value in expected.items():
                got = restored.state[key]
                assert (np.array_equal(got, value) and got.shape == value.shape) if isinstance(value, np.ndarray) else got == value
            checker = CheckpointManager(url)
            for newer in (s for s in STEPS if s > restored.step):
                assert not checker.verify(newer).ok
        assert _cli("verify", url) in (0, 1)
        assert _cli("list", url, "--json") == 0
        assert _cli("gc", url, "--keep", "1", "--grace-seconds", "0") == 0
        again = CheckpointManager(url).restore()
        assert (again.step if again else None) == (restored.step if restored else None)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_decoders_raise_only_verification_errors() -> None:
    for junk in (b"", b"[]", b"null", b'{"format": 1}', b"\xff\xfe", b'{"format": true}'):
        with pytest.raises(VerificationError, match="malformed"):
            decode_commit(junk)
        with pytest.raises(VerificationError, match="malformed"):
            decode_part(junk)
