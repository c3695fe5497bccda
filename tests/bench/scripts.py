"""Running one of ``bench``'s measuring scripts as its documented command does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_script(module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` from the repository's root; its output as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
