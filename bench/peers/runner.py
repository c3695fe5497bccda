"""Running the peers from the harness: their virtual environment, their schemas, their driver.

Each peer runs alone (one at a time, after Kickside's PostgreSQL workloads) in a schema of its
own on the same server, through ``python -m bench.peers.driver`` in ``bench/.peers-venv``,
which is created and filled from ``bench/peers/requirements.txt`` on first use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import make_url

from bench.targets import create_schema, drop_schema

PEERS = ("procrastinate", "pgqueuer")
BENCH = Path(__file__).resolve().parents[1]
VENV = BENCH / ".peers-venv"
REQUIREMENTS = BENCH / "peers" / "requirements.txt"
PEER_TIMEOUT_S = 3600


def ensure_venv(progress: Callable[[str], None]) -> Path:
    """The peers' Python, creating and filling its virtual environment when needed."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".bench-installed"
    wanted = REQUIREMENTS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if not python.exists():
        progress(f"peers: creating {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    progress("peers: installing " + ", ".join(PEERS) + " from PyPI")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
            str(REQUIREMENTS),
        ],
        check=True,
    )
    stamp.write_text(wanted)
    return python


def conninfo(url: str) -> str:
    """A libpq connection string for a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def failed(system: str, counts: dict[str, int], error: str) -> list[dict[str, Any]]:
    """One error entry per workload, for a peer that could not run."""
    return [
        {
            "system": system,
            "backend": "postgresql",
            "workload": workload,
            "params": {"jobs": n},
            "metrics": {},
            "runs": [],
            "details": {},
            "error": error,
        }
        for workload, n in counts.items()
    ]


def run_peer(
    python: Path,
    system: str,
    *,
    url: str,
    schema: str,
    counts: dict[str, int],
    workdir: Path,
    progress: Callable[[str], None],
    history: tuple[int, int] = (10_000, 1_000_000),
    pool_counts: tuple[int, ...] = (1, 2, 4),
) -> list[dict[str, Any]]:
    """Run ``counts`` (workload: jobs) against one peer on a fresh schema; its results."""
    dsn = conninfo(url)
    create_schema(url, schema)
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent), "PGQUEUER_SCHEMA": schema}
    command = [
        str(python),
        "-m",
        "bench.peers.driver",
        "--system",
        system,
        "--conninfo",
        dsn,
        "--schema",
        schema,
        "--workdir",
        str(workdir),
    ]
    command += [f"--count={w}={n}" for w, n in counts.items()]
    command.append(f"--history={history[0]},{history[1]}")
    command.append("--pool-counts=" + ",".join(str(k) for k in pool_counts))
    progress(f"peers: {system} on schema {schema}")
    try:
        proc = subprocess.run(
            command,
            cwd=BENCH.parent,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            timeout=PEER_TIMEOUT_S,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            return failed(system, counts, f"the {system} driver failed (exit {proc.returncode})")
        results: list[dict[str, Any]] = json.loads(lines[-1])["results"]
        return results
    except subprocess.TimeoutExpired:
        return failed(system, counts, f"the {system} driver timed out")
    finally:
        drop_schema(url, schema)
