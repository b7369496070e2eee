"""PyTorch helpers (``pip install 'spotgpu[torch]'``): model, optimizer, RNG and data-order state.

:func:`torch_state` turns any objects with ``state_dict()`` (modules, optimizers, LR
schedulers, samplers, torchdata's StatefulDataLoader) plus the RNG states into the flat
``{str: bytes | ndarray}`` mapping the core saves; :func:`load_torch_state` puts them back.
Tensors of any dtype (bfloat16 included) travel as raw bytes with their dtype and shape
in a small JSON tree, so nothing is pickled and restore needs no ``torch.load``.

Usage::

    state = torch_state({"model": model, "optim": opt, "sampler": sampler})
    mgr.save_async(step, state)
    ...
    restored = mgr.restore()
    if restored:
        load_torch_state(restored.state, {"model": model, "optim": opt, "sampler": sampler})
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import torch
from torch.utils.data import Sampler

from spotgpu.checkpoint.snapshot import contiguous_array

TREE_SUFFIX = "/tree"
RNG_KEY = "rng"


class Stateful(Protocol):
    def state_dict(self) -> Any: ...
    def load_state_dict(self, state: Any, /) -> Any: ...


def check_tensor(tensor: torch.Tensor, where: str) -> None:
    """Refuse, in one line, tensors whose raw bytes are not their value."""
    if tensor.layout != torch.strided:
        raise TypeError(f"{where}: a {tensor.layout} tensor has no flat bytes; fix: save tensor.to_dense()")
    if tensor.is_quantized:
        raise TypeError(f"{where}: a quantized tensor; fix: save dequantize() (or int_repr(), scale and zero point)")
    if tensor.is_nested:
        raise TypeError(f"{where}: a nested tensor; fix: save its components (tensor.unbind())")
    if tensor.device.type == "meta":
        raise TypeError(f"{where}: a meta tensor has no data; fix: materialize it (to_empty + init) before saving")


def tensor_bytes(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor's bytes as a flat uint8 array (zero-copy when already contiguous on CPU).

    Conjugate and negative views are resolved first: their stored bytes are not their value
    (and torch refuses to reinterpret them as bytes). A one-element view with a stride
    (``t[:1, 0]``) is "contiguous" to torch but cannot be viewed as bytes, so it is copied."""
    flat = tensor.detach().resolve_conj().resolve_neg().cpu().contiguous().reshape(-1)
    if not flat.numel():
        return np.empty(0, dtype=np.uint8)
    if flat.stride(0) != 1:  # one element of a strided view counts as contiguous but cannot be viewed as bytes
        flat = torch.empty(flat.shape, dtype=flat.dtype).copy_(flat)
    return flat.view(torch.uint8).numpy()


def tensor_from_bytes(data: Any, dtype: str, shape: list[int]) -> torch.Tensor:
    torch_dtype = getattr(torch, dtype)
    raw = np.asarray(data, dtype=np.uint8).reshape(-1)
    if raw.size == 0:
        return torch.empty(shape, dtype=torch_dtype)
    return torch.from_numpy(raw.copy()).view(torch_dtype).reshape(shape)


def _encode(obj: Any, prefix: str, out: dict[str, Any]) -> Any:
    """A JSON-able tree; tensors and arrays go to ``out`` under ``prefix/N``."""
    if isinstance(obj, torch.Tensor):
        key = f"{prefix}/{len(out)}"
        check_tensor(obj, key)
        out[key] = tensor_bytes(obj)
        return {"__tensor__": key, "dtype": str(obj.dtype).removeprefix("torch."), "shape": list(obj.shape)}
    if isinstance(obj, np.ndarray):
        key = f"{prefix}/{len(out)}"
        out[key] = contiguous_array(obj, key)  # shape, dtype and byte order as they are (0-d too)
        return {"__ndarray__": key}
    if isinstance(obj, np.generic):  # a NumPy scalar keeps its dtype: np.float32(1.5) is not 1.5
        key = f"{prefix}/{len(out)}"
        out[key] = contiguous_array(np.asarray(obj), key)
        return {"__npscalar__": key}
    if isinstance(obj, Mapping):
        return {"__dict__": [[_encode(k, prefix, out), _encode(v, prefix, out)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, prefix, out) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, prefix, out) for v in obj]
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TypeError(
        f"{prefix}: cannot checkpoint a {type(obj).__name__}; fix: keep state_dict values to tensors, arrays and plain Python"
    )


def _decode(node: Any, state: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_decode(v, state) for v in node]
    if not isinstance(node, dict):
        return node
    if "__tensor__" in node:
        return tensor_from_bytes(state[node["__tensor__"]], node["dtype"], node["shape"])
    if "__ndarray__" in node:
        return np.array(state[node["__ndarray__"]])
    if "__npscalar__" in node:
        return np.asarray(state[node["__npscalar__"]])[()]
    if "__tuple__" in node:
        return tuple(_decode(v, state) for v in node["__tuple__"])
    return {_decode(k, state): _decode(v, state) for k, v in node["__dict__"]}


def rng_state() -> dict[str, Any]:
    """Every RNG a training step draws from: Python, NumPy's global, torch CPU (and CUDA)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def encode_tree(name: str, tree: Any) -> dict[str, Any]:
    """One nested state (a ``state_dict()``) as flat checkpoint entries under ``name/``."""
    out: dict[str, Any] = {}
    skeleton = _encode(tree, name, out)
    out[name + TREE_SUFFIX] = json.dumps(skeleton).encode()
    return out


def decode_tree(name: str, state: Mapping[str, Any]) -> Any:
    key = name + TREE_SUFFIX
    if key not in state:
        raise KeyError(f"checkpoint has no {name!r} entry; fix: save it with torch_state({{{name!r}: ...}})")
    return _decode(json.loads(bytes(state[key])), state)


def torch_state(objects: Mapping[str, Stateful], *, rng: bool = True) -> dict[str, Any]:
    """The flat checkpoint state of ``objects`` (name -> object with ``state_dict()``) and RNGs."""
    state: dict[str, Any] = {}
    for name, obj in objects.items():
        if "/" in name or name == RNG_KEY:
            raise ValueError(f"objects key {name!r}: must not contain '/' or be {RNG_KEY!r}")
        state.update(encode_tree(name, obj.state_dict()))
    if rng:
        state.update(encode_tree(RNG_KEY, rng_state()))
    return state


def load_torch_state(state: Mapping[str, Any], objects: Mapping[str, Stateful], *, rng: bool = True) -> None:
    """Load a :func:`torch_state` checkpoint back into ``objects`` (and the RNGs)."""
    for name, obj in objects.items():
        obj.load_state_dict(decode_tree(name, state))
    if rng:
        set_rng_state(decode_tree(RNG_KEY, state))


class ResumableSampler(Sampler[int]):
    """A shuffling sampler that resumes mid-epoch: it checkpoints its epoch and position,
    so a restarted job sees exactly the remaining samples, in the same order.

    With several ranks, pass ``rank``/``world_size`` and each rank takes every
    ``world_size``-th index of the shared permutation (like DistributedSampler).
    """

    def __init__(self, length: int, *, shuffle: bool = True, seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        self.length = length
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.position = 0

    def _order(self) -> list[int]:
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.length, generator=gen).tolist()
        else:
            order = list(range(self.length))
        return order[self.rank :: self.world_size]

    def __iter__(self) -> Iterator[int]:
        order = self._order()
        while self.position < len(order):
            index = order[self.position]
            self.position += 1
            yield index
        self.epoch += 1
        self.position = 0

    def __len__(self) -> int:
        return len(self._order())

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = epoch, 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.epoch, self.position, self.seed = state["epoch"], state["position"], state["seed"]
