"""Shapes and dtypes round-trip exactly (0-d, empty, non-contiguous, big-endian...) through
the NumPy path, ``torch_state`` and DCP (issue 22, item 3)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spotgpu.checkpoint import CheckpointManager

torch = pytest.importorskip("torch")

from spotgpu.checkpoint.torch import decode_tree, encode_tree  # noqa: E402

ZERO_D = {"f": np.array(3.5), "i": np.array(7), "b": np.array(True)}

ODD_ARRAYS = {
    **ZERO_D,
    "c64_0d": np.array(1 - 2j, dtype=np.complex64),
    "empty": np.zeros((0,)),
    "empty_2x0": np.zeros((2, 0), dtype=">f4"),
    "empty_3x0x2": np.zeros((3, 0, 2), dtype=np.int8),
    "big_endian": np.arange(6, dtype=">i4").reshape(2, 3),
    "big_endian_0d": np.array(2.25, dtype=">f8"),
    "strided": np.arange(12.0).reshape(3, 4)[:, ::2],
    "fortran": np.asfortranarray(np.arange(6).reshape(2, 3)),
    "one_strided_element": np.arange(8.0).reshape(4, 2)[:1, 0],
    "f16": np.array([1.5, -0.0, np.inf], dtype=np.float16),
    "i8": np.array([-128, 127], dtype=np.int8),
    "u64": np.array([2**64 - 1], dtype=np.uint64),
    "c64": np.array([1 + 2j, np.nan], dtype=np.complex64),
    "datetime": np.array(["2020-01-01", "NaT"], dtype="M8[D]"),
    "bytes": np.array([b"ab", b"c"]),
    "unicode_0d": np.array("héllo"),
}


def assert_same_array(got: np.ndarray, want: np.ndarray, key: str) -> None:
    assert isinstance(got, np.ndarray), key
    assert (got.shape, got.dtype.str) == (want.shape, want.dtype.str), key
    assert got.tobytes() == want.tobytes(), key  # bytes, so NaN and -0.0 count exactly


def test_numpy_arrays_restore_with_their_shape_and_dtype(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, ODD_ARRAYS)
    restored = mgr.restore()
    assert restored is not None
    for key, want in ODD_ARRAYS.items():
        assert_same_array(restored.state[key], want, key)
    part = json.loads(next(tmp_path.glob("shards/*/*/part-r00000.json")).read_text())
    shapes = {o["key"]: o["shape"] for o in part["items"]}
    assert [shapes[k] for k in ZERO_D] == [[], [], []]  # the manifest records 0-d, not [1]


def test_async_save_keeps_0d_shapes(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save_async(1, ODD_ARRAYS).wait(30)
    restored = mgr.restore()
    assert restored is not None
    for key, want in ODD_ARRAYS.items():
        assert_same_array(restored.state[key], want, key)


def test_restore_into_0d_arrays_fills_them_in_place(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, ZERO_D)
    into = {k: np.zeros_like(v) for k, v in ZERO_D.items()}
    restored = mgr.restore(into=into)
    assert restored is not None
    for key, want in ZERO_D.items():
        assert restored.state[key] is into[key]
        assert_same_array(into[key], want, key)


def test_masked_arrays_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"state\['m'\]: a masked array would lose its mask; fix: save .data and .mask"):
        CheckpointManager(tmp_path.as_uri()).save(1, {"m": np.ma.masked_array([1, 2], mask=[0, 1])})


def _scratch_dir() -> str:
    return tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


ANY_DTYPE = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="?"),
    hnp.unsigned_integer_dtypes(endianness="?"),
    hnp.floating_dtypes(endianness="?"),
    hnp.complex_number_dtypes(endianness="?"),
    hnp.datetime64_dtypes(endianness="?"),
    hnp.timedelta64_dtypes(endianness="?"),
    hnp.byte_string_dtypes(endianness="?", min_len=1, max_len=4),
    hnp.unicode_string_dtypes(endianness="?", min_len=1, max_len=4),
)
ANY_SHAPE = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


@st.composite
def any_array(draw: st.DrawFn) -> np.ndarray:
    arr = draw(hnp.arrays(ANY_DTYPE, ANY_SHAPE))
    if arr.ndim and draw(st.booleans()):  # a non-contiguous view of it
        arr = arr[tuple(slice(None, None, draw(st.sampled_from([-2, -1, 2]))) for _ in range(arr.ndim))]
    if arr.ndim > 1 and draw(st.booleans()):
        arr = arr.T
    return arr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["a", "b", "w/x"]), any_array(), min_size=1, max_size=3))
def test_property_any_shape_and_dtype_round_trips(state: dict[str, np.ndarray]) -> None:
    url = Path(_scratch_dir()).as_uri()
    mgr = CheckpointManager(url)
    mgr.save(1, state)
    restored = CheckpointManager(url).restore()
    assert restored is not None
    for key, want in state.items():
        assert_same_array(restored.state[key], want, key)
    into = {k: np.empty(v.shape, v.dtype) for k, v in state.items()}
    assert CheckpointManager(url).restore(into=into) is not None
    for key, want in state.items():
        assert_same_array(into[key], want, key)


# ---- torch_state ----------------------------------------------------------------------

ODD_TENSORS = {
    "f32_0d": torch.tensor(2.5),
    "bool_0d": torch.tensor(True),
    "int_0d": torch.tensor(-3, dtype=torch.int64),
    "bool": torch.tensor([True, False, True]),
    "bf16": torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16),
    "bf16_0d": torch.tensor(0.5, dtype=torch.bfloat16),
    "f16": torch.tensor([1.0, float("inf")], dtype=torch.float16),
    "i8": torch.tensor([-128, 127], dtype=torch.int8),
    "u16": torch.tensor([1, 65535]).to(torch.uint16),
    "f8": torch.tensor([1.0, -2.0]).to(torch.float8_e4m3fn),
    "c64": torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64),
    "c128_0d": torch.tensor(1j, dtype=torch.complex128),
    "empty": torch.empty(0),
    "empty_2x0": torch.empty(2, 0),
    "transposed": torch.arange(12.0).reshape(3, 4).t(),
    "expanded": torch.ones(1).expand(3),
    "one_strided_element": torch.arange(8.0).reshape(4, 2)[:1, 0],
    "conj": torch.tensor([1 + 2j], dtype=torch.complex64).conj(),
    "neg_view": torch.tensor([1 + 1j, 2 + 3j]).conj().imag,
    "requires_grad": torch.ones(2, requires_grad=True),
}


def assert_same_tensor(got: torch.Tensor, want: torch.Tensor, key: str) -> None:
    want = want.detach().resolve_conj().resolve_neg()
    assert isinstance(got, torch.Tensor), key
    assert (tuple(got.shape), got.dtype) == (tuple(want.shape), want.dtype), key
    if want.numel():  # compare bytes (NaN, -0.0 and float8 exactly), through a fresh dense copy
        raw = [torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1).view(torch.uint8) for t in (got, want)]
        assert torch.equal(*raw), key


def test_torch_state_round_trips_every_tensor_dtype_and_shape(tmp_path: Path) -> None:
    tree = {**ODD_TENSORS, "nested": {"np_0d": np.array(4.0), "np_bool_0d": np.array(True)}}
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, encode_tree("x", tree))
    restored = mgr.restore()
    assert restored is not None
    back = decode_tree("x", restored.state)
    for key, want in ODD_TENSORS.items():
        assert_same_tensor(back[key], want, key)
    assert_same_array(back["nested"]["np_0d"], np.array(4.0), "np_0d")
    assert_same_array(back["nested"]["np_bool_0d"], np.array(True), "np_bool_0d")


def test_torch_state_keeps_numpy_arrays_and_scalars_exact(tmp_path: Path) -> None:
    tree = {"arrays": dict(ODD_ARRAYS), "f32": np.float32(1.5), "i64": np.int64(3), "b": np.bool_(True)}
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, encode_tree("x", tree))
    restored = mgr.restore()
    assert restored is not None
    back = decode_tree("x", restored.state)
    for key, want in ODD_ARRAYS.items():
        assert_same_array(back["arrays"][key], want, key)
    for key in ("f32", "i64", "b"):
        assert type(back[key]) is type(tree[key]) and back[key] == tree[key], key


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (torch.eye(2).to_sparse(), r"x/0: a torch.sparse_coo tensor has no flat bytes; fix: save tensor.to_dense\(\)"),
        (torch.empty(2, device="meta"), r"x/0: a meta tensor has no data; fix: materialize it"),
    ],
)
def test_tensors_without_flat_bytes_are_refused_in_one_line(tensor: torch.Tensor, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        encode_tree("x", {"t": tensor})


# ---- DCP (one process, no process group) ------------------------------------------------


def test_dcp_round_trips_every_tensor_dtype_and_shape(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    from spotgpu.checkpoint.dcp import ExactSavePlanner, GenerationReader, GenerationWriter

    arrays = {f"np_{k}": v for k, v in ODD_ARRAYS.items()}
    state = {**ODD_TENSORS, **arrays}
    url = tmp_path.as_uri()
    dcp.save(state, storage_writer=GenerationWriter(url, step=1), planner=ExactSavePlanner(), no_dist=True)
    target = {
        **{k: torch.zeros_like(v.detach().resolve_conj().resolve_neg()) for k, v in ODD_TENSORS.items()},
        **{k: None for k in arrays},
    }
    dcp.load(target, storage_reader=GenerationReader(url), no_dist=True)
    for key, want in ODD_TENSORS.items():
        assert_same_tensor(target[key], want, key)
    for key, want in arrays.items():
        assert_same_array(target[key], want, key)
