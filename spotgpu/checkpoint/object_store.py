"""Moved to :mod:`spotgpu.storage.object_store` (one object-store layer, issue 24).

Kept only for importers outside the checkpoint library that still name this path
(``tests/economics/test_cost_model.py`` reads ``PART_SIZE``); delete once they import
``spotgpu.storage.object_store``.
"""

from spotgpu.storage.object_store import PART_SIZE, ObjectStore

__all__ = ["PART_SIZE", "ObjectStore"]
