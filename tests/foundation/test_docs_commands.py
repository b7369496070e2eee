"""Every ``spotgpu`` command the docs and the README name exists, and says what it does (issue 31, item 9).

Defects: docs/configuration.md named a ``spotgpu estimate`` command that does not exist;
``spotgpu profile fit --help`` said "as one JSON document as one JSON document"; ``spotgpu cost
--help`` had no description. The walk reads every fenced block and inline code span of docs/*.md and
README.md, takes each ``spotgpu WORD...`` as far as the words name (sub)commands, and runs
``--help`` on it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from spotgpu.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: Code: fenced blocks and inline spans. A command: ``spotgpu`` as a word (not spotgpu.x, spotgpu[x], spotgpu/),
#: at a line or span start, after a shell separator or a venv's bin/.
_CODE = re.compile(r"```([^\n]*)\n(.*?)```|`([^`\n]+)`", re.S)
#: Fenced blocks in these languages hold shell commands; a python or typescript block says ``spotgpu`` otherwise.
SHELL = ("", "bash", "sh", "shell", "console", "text")
_COMMAND = re.compile(r"(?:^|[\s;&|(]|/bin/)spotgpu((?:[ \t]+[a-z][a-z0-9-]*)+)", re.M)
PARSER = build_parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


def named_commands() -> dict[tuple[str, ...], str]:
    """(command path) -> where it was first seen, for every ``spotgpu ...`` in the pages' code."""
    found: dict[tuple[str, ...], str] = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _CODE.finditer(text):
            if match.group(2) is not None and match.group(1).strip() not in SHELL:
                continue
            code = match.group(2) if match.group(2) is not None else match.group(3)
            line = text[: match.start()].count("\n") + 1
            for command in _COMMAND.finditer(code):
                words = command.group(1).split()
                path: list[str] = []
                parser = PARSER
                for word in words:
                    children = subcommands(parser)
                    if word not in children:
                        break
                    path.append(word)
                    parser = children[word]
                key = tuple(path) if path else (words[0],)
                found.setdefault(key, f"{page.relative_to(REPO)}:{line}: spotgpu {' '.join(words)}")
    return found


COMMANDS = named_commands()


def test_the_walk_finds_the_documented_commands() -> None:
    assert ("drill", "local") in COMMANDS and ("preview",) in COMMANDS and ("ckpt", "verify") in COMMANDS
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda p: " ".join(p))
def test_every_documented_command_exists_and_has_help(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    where = COMMANDS[path]
    assert path[0] in subcommands(PARSER), f"{where}: `spotgpu {path[0]}` is not a command"
    assert main([*path, "--help"]) == 0, where
    text = capsys.readouterr().out
    assert text.startswith(f"usage: spotgpu {' '.join(path)}"), where


def leaves(parser: argparse.ArgumentParser, path: str = "spotgpu") -> list[tuple[str, argparse.ArgumentParser]]:
    children = subcommands(parser)
    if not children:
        return [(path, parser)]
    return [leaf for name, child in children.items() for leaf in leaves(child, f"{path} {name}")]


@pytest.mark.parametrize(("path", "parser"), leaves(PARSER), ids=lambda x: x if isinstance(x, str) else "")
def test_every_command_says_what_it_does_once(path: str, parser: argparse.ArgumentParser) -> None:
    assert parser.description, f"{path} --help has no description"
    text = parser.format_help()
    for phrase in re.findall(r"(as one JSON document)", text):
        assert text.count(f"{phrase} {phrase}") == 0, f"{path}: {phrase!r} twice in a row"
    assert "JSON document as one JSON document" not in " ".join(text.split()), path
