"""Executors die with their supervisor even when it is killed while they are still starting.

An executor checks that its parent is still the supervisor that started it. It used to compare
against the parent it read itself once started; when the supervisor had died first, that was
already the adoptive parent (PID 1), the check passed, and the orphans imported the app.

The window is made wide and certain from outside the code under test: a ``sitecustomize``
module on the executors' path holds every spawned interpreter at start-up until the test,
having killed the supervisor with SIGKILL, lets them go.
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from kickside_engine import Database

from ..conftest import Target
from ..support.processes import start_worker, stop, wait_for
from ..support.procfs import alive, process_tree

pytestmark = pytest.mark.slow
EXECUTORS = 4

HOLD = textwrap.dedent(
    """
    import os, sys, time

    # Spawned executors of the pool under test wait here (at most a minute) to be let go.
    if "--multiprocessing-fork" in sys.argv and os.environ.get("KST_EXECUTOR_HOLD"):
        deadline = time.monotonic() + 60
        while not os.path.exists(os.environ["KST_EXECUTOR_HOLD"]):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
    """
)

APP = textwrap.dedent(
    """
    import multiprocessing
    import os

    from kickside_engine import WorkerRegistry

    if multiprocessing.parent_process() is not None:  # an executor (the supervisor reads it too)
        with open(os.environ["KST_APP_IMPORTS"], "a") as log:
            log.write(f"{os.getpid()}\\n")
    registry = WorkerRegistry()
    """
)


def _executors(supervisor: int) -> list[int]:
    """The supervisor's executor processes (spawned interpreters), not its resource tracker."""
    found = []
    for pid in process_tree(supervisor)[1:]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"--multiprocessing-fork" in cmdline:
            found.append(pid)
    return found


def test_executors_starting_when_their_supervisor_is_killed_exit_without_loading_the_app(
    db: Database, target: Target, tmp_path: Path
) -> None:
    path = tmp_path / "path"
    path.mkdir()
    (path / "sitecustomize.py").write_text(HOLD)
    (path / "orphan_app.py").write_text(APP)
    hold, imports = tmp_path / "go", tmp_path / "imports"
    proc = start_worker(
        target.cli_args(),
        app="orphan_app",
        queues=f"default:{EXECUTORS}",
        env={"KST_EXECUTOR_HOLD": str(hold), "KST_APP_IMPORTS": str(imports)},
        pythonpath=[str(path)],
        log=tmp_path / "pool.out",
    )
    held: list[int] = []
    try:
        held += wait_for(
            lambda: (found := _executors(proc.pid)) and len(found) == EXECUTORS and found,
            90,
            "the supervisor to spawn its executors",
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        hold.touch()
        wait_for(lambda: not any(alive(pid) for pid in held), 60, "the executors to exit")
    finally:
        hold.touch()
        stop(proc)
        for pid in held:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not imports.exists(), f"orphaned executors loaded the app: {imports.read_text()}"
