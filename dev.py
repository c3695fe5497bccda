#!/usr/bin/env python3
"""Set up a virtual environment and run Kickside's demo or its tests.

    python3 dev.py demo    # the live dashboard over a demo workload, on its own SQLite file
    python3 dev.py test    # the whole test suite, on SQLite and PostgreSQL

Each command creates ``.venv`` beside this file on first use and installs Kickside into it
(with its test tools); later runs reuse it and reinstall only when ``pyproject.toml`` changed.
Extra arguments are passed on (``python3 dev.py test -k claims``). Tests run on several worker
processes (pytest-xdist: ``-n 0`` runs them in this one).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".kickside-installed"


def ensure_venv() -> None:
    """Create the virtual environment and install Kickside, unless it is already current."""
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted and (BIN / "kickside").exists():
        return
    if not (BIN / "python").exists():
        print(f"creating {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [str(BIN / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    print("installing kickside and its test tools into .venv", file=sys.stderr)
    subprocess.run([*pip, "install", "-e", f"{ROOT}[dev]"], check=True)
    STAMP.write_text(wanted)


def test_workers(args: list[str]) -> list[str]:
    """pytest-xdist options unless ``args`` choose (``-n``/``--numprocesses``, or ``-p
    no:xdist``): one worker more than the cores (``KICKSIDE_TEST_WORKERS`` overrides), since
    most tests wait on real processes and databases; idle workers take work from busy ones."""
    if any(a.startswith(("-n", "--numprocesses")) or a == "no:xdist" for a in args):
        return []
    workers = os.environ.get("KICKSIDE_TEST_WORKERS") or str((os.cpu_count() or 1) + 1)
    return ["-n", workers, "--dist", "worksteal"]


def run(args: list[str]) -> int:
    return subprocess.call(args, cwd=ROOT)


def main() -> int:
    command, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command not in ("demo", "test"):
        print(__doc__, file=sys.stderr)
        return 2
    ensure_venv()
    if command == "test":
        return run([str(BIN / "python"), "-m", "pytest", *test_workers(rest), *rest])
    return run([str(BIN / "kickside"), "demo", "--dashboard", *rest])


if __name__ == "__main__":
    sys.exit(main())
