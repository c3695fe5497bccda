"""`kickside worker` exits non-zero when its pool stops on an error.

Real `kickside worker` processes: what systemd or Kubernetes sees is the exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from kickside_engine import ConfigurationError, Database
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..conftest import Target
from ..support.processes import ROOT

pytestmark = pytest.mark.slow


#: An app that imports in the supervisor (which reads its SCHEDULE) but not in executors.
BROKEN_IN_EXECUTORS = textwrap.dedent(
    """
    import multiprocessing

    from kickside_engine import WorkerRegistry

    if multiprocessing.parent_process() is not None:
        raise RuntimeError("this app does not load in an executor")
    registry = WorkerRegistry()
    """
)


def _worker(
    target: Target, *extra: str, path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *([str(path)] if path else [])])}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kickside_tui.cli",
            *target.cli_args(),
            "worker",
            "--queues",
            "default:2",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["process", "in-process"])
def test_a_worker_whose_app_does_not_load_exits_2(
    db: Database, target: Target, mode: list[str]
) -> None:
    proc = _worker(target, "--app", "nosuch.module", *mode)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert "nosuch" in line, proc.stderr


def test_a_worker_whose_executors_cannot_load_the_app_exits_2(
    db: Database, target: Target, tmp_path: Path
) -> None:
    (tmp_path / "broken_in_executors.py").write_text(BROKEN_IN_EXECUTORS)
    proc = _worker(target, "--app", "broken_in_executors", path=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert "could not load the app 'broken_in_executors'" in line, line
    assert "does not load in an executor" in line, line


def test_an_embedded_pool_whose_executors_cannot_load_the_app_raises(db: Database) -> None:
    pool = WorkerPool(
        db, PoolConfig(queues={"default": 2}, app="nosuch.module", shutdown_grace=timedelta(1))
    )
    with pytest.raises(ConfigurationError, match=r"could not load the app 'nosuch\.module'"):
        pool.run()
    assert isinstance(pool.error, ConfigurationError)
