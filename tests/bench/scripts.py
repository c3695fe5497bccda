"""Running one of ``bench``'s measuring scripts as its documented command does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Ran(subprocess.CompletedProcess[str]):
    """A finished script, with its process id: the schemas a script makes are named after it,
    so a test checks for its own while other tests' scripts run beside it."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str, pid: int):
        super().__init__(args, returncode, stdout, stderr)
        self.pid = pid


def run_script(module: str, *args: str, timeout: float = 300) -> Ran:
    """``python -m <module> <args>`` from the repository's root; its output as text."""
    command = [sys.executable, "-m", module, *args]
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    return Ran(command, proc.returncode, stdout, stderr, proc.pid)
