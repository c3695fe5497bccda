"""The awa peer counts exactly the jobs of the current run that awa has completed.

It runs in the peers' environment (``bench/.peers-venv``, where ``awa-pg`` is installed; the
test is skipped without it), on a throwaway database of its own: awa's schema is always named
``awa``, so it must not share a database with anyone's benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import make_url

from ..conftest import PG_URL, require_postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PEERS_PYTHON = ROOT / "bench" / ".peers-venv" / "bin" / "python"

#: Run by the peers' Python: a worker (concurrency 10) in its own process, as the harness runs
#: it; 20 jobs of 1.5 s (10 run while 10 wait), then a reset and 300 no-op jobs.
SCRIPT = """
import json, sys, time
from pathlib import Path
from bench.peers import awa_peer, protocol

conninfo, log = sys.argv[1], Path(sys.argv[2])
peer = awa_peer.open_peer(conninfo, "unused")
out = {}
worker = protocol.WorkerProcess(
    peer.module, ["--conninfo", conninfo, "--schema", "unused", "--concurrency", "10"], log
)
try:
    with worker:
        peer.reset()
        peer.bulk_enqueue(20, "io", {"seconds": 1.5})
        time.sleep(0.75)
        out["while_running"] = peer.completed()
        seen = [peer.completed()]
        while seen[-1] < 20 and len(seen) < 400:
            time.sleep(0.05)
            seen.append(peer.completed())
        out["slow_seen"] = seen
        peer.reset()
        out["after_reset"] = peer.completed()
        peer.bulk_enqueue(300)
        seen = [peer.completed()]
        while seen[-1] < 300 and len(seen) < 1200:
            time.sleep(0.05)
            seen.append(peer.completed())
        time.sleep(1.0)
        seen.append(peer.completed())
        out["noop_seen"] = seen
finally:
    peer.close()
print(json.dumps(out))
"""


def _peers_python() -> Path:
    if not PEERS_PYTHON.exists():
        pytest.skip(f"{PEERS_PYTHON} does not exist (python -m bench.run creates it)")
    probe = subprocess.run([str(PEERS_PYTHON), "-c", "import awa"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("awa-pg is not installed in the peers' environment")
    return PEERS_PYTHON


def test_awa_counts_only_completed_jobs_of_the_current_run(tmp_path: Path) -> None:
    require_postgres()
    python = _peers_python()
    url = make_url(PG_URL).set(drivername="postgresql")
    name = f"kst_awa_{uuid.uuid4().hex[:12]}"
    admin = url.render_as_string(hide_password=False)
    dsn = url.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        proc = subprocess.run(
            [str(python), "-c", SCRIPT, dsn, str(tmp_path / "worker.log")],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    # 10 jobs are running (claimed by a receipt, in no awa.jobs row) and none has finished.
    assert out["while_running"] == 0
    slow = out["slow_seen"]
    assert slow[-1] == 20
    assert slow == sorted(slow)
    # A reset starts the count again although awa keeps the finished jobs.
    assert out["after_reset"] == 0
    noop = out["noop_seen"]
    assert noop[-2] == 300 and noop[-1] == 300, "the count must stop at the run's jobs"
    assert noop == sorted(noop)
