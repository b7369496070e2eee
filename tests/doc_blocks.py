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


def run_block(page: str, marker: str, cwd: Path, env: dict[str, str], timeout: float = 60) -> str:
    """Run the first python block after ``marker`` in ``docs/<page>`` as a script in ``cwd``; its stdout.
    Fails with the script's stderr if it exits non-zero."""
    import subprocess
    import sys

    script = cwd / "example.py"
    script.write_text(block_after(page, marker))
    done = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout
