"""What a store says about an object: its listing entry and the version a conditional write checks.

Plain values, apart from the ``Store`` interface and its backends, so each backend imports
these without importing the module that chooses between backends.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ObjectInfo:
    """What ``head``/``list`` report about one object (path is relative to the store root)."""

    path: str
    size: int
    last_modified: dt.datetime


@dataclass(frozen=True)
class Version:
    """Which write of an object a reader saw: what :meth:`Store.put_if` checks.

    Backends differ in which token a conditional update checks, so both are kept
    (obstore's ``UpdateVersion``): S3 and Azure check ``e_tag``, GCS checks the
    generation, which obstore reports as ``version``. The local store puts a digest of
    the content in ``e_tag``.
    """

    e_tag: str | None = None
    version: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The tokens that are set (obstore's ``UpdateVersion`` shape)."""
        return {k: v for k, v in (("e_tag", self.e_tag), ("version", self.version)) if v}

    @classmethod
    def of(cls, meta: Any) -> Version:
        """From obstore's object metadata or put result (any mapping with ``e_tag``/``version``)."""
        return cls(*(str(meta[k]) if meta.get(k) else None for k in ("e_tag", "version")))
