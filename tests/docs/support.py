"""What the docs tests share: the pages' code blocks, the build hook's generators, running an
example as a reader would (``python example.py`` in a fresh folder) and checking a `kickside`
command line against the CLI's command tree."""

from __future__ import annotations

import functools
import importlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

from ..support.processes import ROOT

DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
PAGES = sorted(DOCS.rglob("*.md"))
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page."""

    page: Path
    lang: str
    body: str
    line: int

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text()
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        yield Block(page, match.group(1), match.group(3), line)


def hook(name: str) -> ModuleType:
    """A module of ``docs/hooks`` (``generate``, ``cli_reference``), imported as MkDocs does."""
    path = str(DOCS / "hooks")
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module(name)


def example_env(home: Path, *paths: Path, **extra: str) -> dict[str, str]:
    """The environment a reader's shell has: Kickside's embedded database under ``home`` (no
    URL configured) and the example's folder importable, as it is for ``python example.py``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KICKSIDE_")}
    env["KICKSIDE_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in paths), str(ROOT)])
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    """Run a command as the page shows it; fail with its output unless it exits 0."""
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{shlex.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@functools.cache
def _kickside_tree() -> Any:
    from kickside_tui.cli.main import app

    return typer.main.get_command(app)


def check_kickside_command(argv: list[str], where: str) -> Any:
    """Check that ``kickside ...`` names a real command and only options it takes; returns
    the command."""
    assert argv[0] == "kickside", where
    command = _kickside_tree()
    rest = argv[1:]
    while rest and hasattr(command, "commands"):  # a group: its own options, then a command
        token = rest.pop(0)
        if token.startswith("-"):
            name = token.split("=", 1)[0]
            param = next((p for p in command.params if name in p.opts), None)
            assert param is not None, f"{where}: `{shlex.join(argv)}`: no option {name} here"
            if not getattr(param, "is_flag", False) and "=" not in token:
                rest.pop(0)
        elif token in command.commands:
            command = command.commands[token]
        else:
            assert token == "--help", f"{where}: no such command: {shlex.join(argv)}"
    options = {o for p in command.params for o in [*p.opts, *p.secondary_opts]}
    for token in rest:
        if token.startswith("-") and not re.fullmatch(r"-\d+", token):
            name = token.split("=", 1)[0]
            assert name in options, f"{where}: `{shlex.join(argv[:3])}` has no option {name}"
    return command


def command_lines(text: str) -> Iterator[list[str]]:
    """The `kickside` command lines of a console block, comments and placeholders aside."""
    for raw in text.splitlines():
        line = raw.split("  #", 1)[0].strip()
        if not line.startswith("kickside ") and line != "kickside":
            continue
        # `kickside slots | leases | nodes` lists alternatives; `[--ensure-due]` an option.
        line = re.sub(r"\[(--[\w-]+)\]", r"\1", line)
        for n, part in enumerate(line.split(" | ")):
            yield shlex.split(part if n == 0 else f"kickside {part}")
