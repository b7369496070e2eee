"""Where a generation's bytes are on a file:// store (format 2), for tests that damage them."""

from __future__ import annotations

from pathlib import Path

# ---- where a generation's bytes are on a file:// store (format 2) -------------------------


def shard_file(root: Path, generation: str, rank: int = 0, index: int = 0) -> Path:
    from spotgpu.checkpoint import layout

    return root / layout.shard_path(generation, rank, index)


def part_file(root: Path, generation: str, rank: int = 0) -> Path:
    from spotgpu.checkpoint import layout

    return root / layout.part_path(generation, rank)


def value_span(root: Path, generation: str, key: str, rank: int = 0) -> tuple[Path, int, int]:
    """The shard file holding ``key`` and the value's offset and size in it (from the part)."""
    from spotgpu.checkpoint.manifest import decode_part

    part = decode_part(part_file(root, generation, rank).read_bytes())
    item = next(i for i in part.items if i.key == key)
    return root / item.path, item.offset, item.size


def flip_byte(root: Path, generation: str, key: str, rank: int = 0, at: float = 0.5) -> None:
    """Flip one bit of value ``key``'s bytes in its shard, ``at`` of the way into the value."""
    path, offset, size = value_span(root, generation, key, rank)
    raw = bytearray(path.read_bytes())
    raw[offset + int(size * at)] ^= 0x01
    path.write_bytes(raw)
