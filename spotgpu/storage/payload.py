"""What a ``put`` accepts, and the two helpers every store uses to walk it and to name objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from typing_extensions import Buffer

#: What a ``put`` accepts: one contiguous buffer or an iterable of chunks (streamed).
Payload = Buffer | Iterable[Buffer]


def iter_chunks(data: Payload) -> Iterator[memoryview]:
    """A payload as flat byte views: one view for a buffer, one per chunk for an iterable."""
    try:
        yield memoryview(data).cast("B")  # type: ignore[arg-type]
        return
    except TypeError:
        pass
    for chunk in data:  # type: ignore[union-attr]
        yield memoryview(chunk).cast("B")


def join(*parts: str) -> str:
    """Join store path segments with '/', ignoring empty ones."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))
