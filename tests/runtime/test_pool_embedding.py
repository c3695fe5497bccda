"""An embedded process pool started without the ``__main__`` guard says what to do, once.

Executors are spawned: each imports the main module again, and an unguarded main module starts
a pool there too. The pool used to report that as "pool stopped by an unexpected error" with
multiprocessing's bootstrapping traceback, and to respawn the executors forever. These tests
run real scripts in their own interpreter, as an application would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..support.processes import ROOT

pytestmark = pytest.mark.slow

APP = textwrap.dedent(
    """
    import os

    from kickside_engine import WorkerRegistry

    registry = WorkerRegistry()


    @registry.worker("touch")
    def touch(args, job):
        with open(os.environ["KST_RAN"], "a") as fh:
            fh.write(f"{job.id}\\n")
    """
)

SETUP = textwrap.dedent(
    """
    import os
    import time

    from kickside_engine import Database, JobBuilder, enqueue, migrate
    from kickside_engine.runtime import PoolConfig, WorkerPool

    db = Database.from_url(os.environ["KST_DATABASE_URL"])
    """
)

UNGUARDED_RUN = SETUP + textwrap.dedent(
    """
    migrate.upgrade(db)
    pool = WorkerPool(db, PoolConfig(app="embedded_app", queues={"default": 2}))
    pool.run()
    """
)

UNGUARDED_START = SETUP + textwrap.dedent(
    """
    migrate.upgrade(db)
    pool = WorkerPool(db, PoolConfig(app="embedded_app", queues={"default": 2}))
    pool.start()
    deadline = time.monotonic() + 30
    while pool.error is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pool.stop(30)
    """
)

GUARDED = SETUP + textwrap.dedent(
    """
    def main():
        migrate.upgrade(db)
        enqueue(db, JobBuilder("touch", {}))
        pool = WorkerPool(db, PoolConfig(app="embedded_app", queues={"default": 2}))
        pool.start()
        deadline = time.monotonic() + 30
        while not os.path.exists(os.environ["KST_RAN"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        pool.stop(30)


    if __name__ == "__main__":
        main()
    """
)

GUARD = 'start the pool under `if __name__ == "__main__":`'


def _run_script(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "embedded_app.py").write_text(APP)
    script = tmp_path / "service.py"
    script.write_text(source)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "KST_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.sqlite3'}",
        "KST_RAN": str(tmp_path / "ran"),
    }
    return subprocess.run(
        [sys.executable, str(script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_says_to_guard(result: subprocess.CompletedProcess[str], script: Path) -> None:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if GUARD in line]
    assert lines, result.stderr
    assert str(script) in lines[0]  # names the module to fix
    for noise in ("bootstrapping phase", "spawn_main", "unexpected error", "freeze_support"):
        assert noise not in result.stderr, result.stderr


def test_an_unguarded_main_module_running_a_pool_says_to_guard_it(tmp_path: Path) -> None:
    result = _run_script(tmp_path, UNGUARDED_RUN)
    _assert_says_to_guard(result, tmp_path / "service.py")
    assert "ConfigurationError" in result.stderr.splitlines()[-1]


def test_an_unguarded_main_module_starting_a_pool_on_a_thread_says_to_guard_it(
    tmp_path: Path,
) -> None:
    result = _run_script(tmp_path, UNGUARDED_START)
    _assert_says_to_guard(result, tmp_path / "service.py")
    assert "PoolFailedError" in result.stderr.splitlines()[-1]


def test_a_guarded_main_module_runs_its_jobs(tmp_path: Path) -> None:
    result = _run_script(tmp_path, GUARDED)
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "ran").read_text().split()) == 1
    assert GUARD not in result.stderr


def test_a_pool_built_while_a_spawned_child_imports_the_main_module_is_refused(
    tmp_path: Path,
) -> None:
    """Outside an executor (the application's own spawned process) the error is raised."""
    source = SETUP + textwrap.dedent(
        """
        import multiprocessing

        try:
            WorkerPool(db, PoolConfig(app="embedded_app", queues={"default": 1}))
        except Exception as exc:
            if multiprocessing.current_process().name == "helper":
                with open(os.environ["KST_RAN"], "w") as fh:
                    fh.write(f"{type(exc).__name__}: {exc}")


        def nothing():
            pass


        if __name__ == "__main__":
            child = multiprocessing.get_context("spawn").Process(target=nothing, name="helper")
            child.start()
            child.join(60)
        """
    )
    result = _run_script(tmp_path, source)
    assert result.returncode == 0, result.stderr
    refused = (tmp_path / "ran").read_text()
    assert refused.startswith("ConfigurationError: the main module") and GUARD in refused
