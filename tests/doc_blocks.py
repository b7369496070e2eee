"""The docs' examples as the tests run them: one reader for every test that runs a block "exactly as written".

Two ways a block is pointed at: between ``<!-- NAME -->`` and ``<!-- /NAME -->`` (a fenced block and
nothing else), or the first fenced block of a language after a marker line
(``<!-- tested: tests/... -->``).
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def marked_block(page: str, name: str) -> str:
    """The fenced block's text between ``<!-- name -->`` and ``<!-- /name -->`` of ``docs/<page>``."""
    text = (DOCS / page).read_text(encoding="utf-8")
    block = text.split(f"<!-- {name} -->\n", 1)[1].split(f"<!-- /{name} -->", 1)[0]
    return block.split("\n", 1)[1].rsplit("```", 1)[0]


def block_after(page: str, marker: str, language: str = "python") -> str:
    """The first fenced ``language`` block after ``marker`` in ``docs/<page>``."""
    text = (DOCS / page).read_text(encoding="utf-8")
    match = re.search(rf"```{language}\n(.*?)```", text[text.index(marker) :], re.S)
    assert match, f"a {language} block follows {marker!r} in docs/{page}"
    return match.group(1)
