"""Running the peers from the harness: their virtual environment, their schemas, their driver.

Each peer runs alone (one at a time, after Kickside's PostgreSQL workloads) in a schema of its
own on the same server, through ``python -m bench.peers.driver`` in ``bench/.peers-venv``,
which is created and filled from ``bench/peers/requirements.txt`` on first use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import make_url

from bench.targets import create_schema, drop_schema

PEERS = ("procrastinate", "pgqueuer", "chancy", "awa", "oban", "huey")
#: Peers on SQLite (issue 26): run after Kickside's SQLite workloads, each once per durability
#: mode (its system name in the results: ``huey`` at FULL, Huey's default, and ``huey-normal``
#: at NORMAL, Kickside's default).
SQLITE_PEERS = frozenset({"huey"})
SQLITE_MODES = ("FULL", "NORMAL")
#: The workloads the SQLite peers run.
SQLITE_WORKLOADS = ("bulk_enqueue", "single_enqueue", "drain", "latency", "work_per_job")
#: Workloads no PostgreSQL peer runs.
SQLITE_ONLY_WORKLOADS = frozenset({"work_per_job"})
BENCH = Path(__file__).resolve().parents[1]
VENV = BENCH / ".peers-venv"
REQUIREMENTS = BENCH / "peers" / "requirements.txt"
#: oban (Python) needs Python 3.12+: a second environment, from the machine's pyenv.
VENV312 = BENCH / ".peers312-venv"
REQUIREMENTS312 = BENCH / "peers" / "requirements312.txt"
PYTHON312_ENV = "KICKSIDE_BENCH_PYTHON312"
PYTHON312_CANDIDATES = ("/root/.pyenv/versions/3.12.1/bin/python", "python3.13", "python3.12")
#: Peers that run in the Python 3.12 environment.
IN_VENV312 = frozenset({"oban"})
#: Peers added for issue 21 run its async workloads only (the others run every workload).
ASYNC_WORKLOADS = ("async_drain", "io_drain", "async_latency")
ONLY: dict[str, tuple[str, ...]] = {p: ASYNC_WORKLOADS for p in ("chancy", "awa", "oban")}
PEER_TIMEOUT_S = 3600


def ensure_venv(
    progress: Callable[[str], None],
    venv: Path = VENV,
    requirements: Path = REQUIREMENTS,
    base_python: str = sys.executable,
) -> Path:
    """A peers' Python, creating and filling its virtual environment when needed."""
    python = venv / "bin" / "python"
    stamp = venv / ".bench-installed"
    wanted = requirements.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if not python.exists():
        progress(f"peers: creating {venv}")
        subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    progress(f"peers: installing {requirements.name} from PyPI into {venv.name}")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
            str(requirements),
        ],
        check=True,
    )
    stamp.write_text(wanted)
    return python


def python312() -> str:
    """An interpreter of Python 3.12 or later for :data:`VENV312` (``OSError`` if none)."""
    candidates = [os.environ.get(PYTHON312_ENV, ""), *PYTHON312_CANDIDATES]
    for candidate in filter(None, candidates):
        found = shutil.which(candidate)
        if found is None:
            continue
        probe = subprocess.run(
            [found, "-c", "import sys; print(sys.version_info >= (3, 12))"],
            capture_output=True,
            text=True,
        )
        if probe.stdout.strip() == "True":
            return found
    raise OSError(f"no Python 3.12+ found (set {PYTHON312_ENV})")


def ensure_venv312(progress: Callable[[str], None]) -> Path:
    """The Python 3.12+ peers' environment (oban), created like :data:`VENV`."""
    python = VENV312 / "bin" / "python"
    base = str(python) if python.exists() else python312()
    return ensure_venv(progress, VENV312, REQUIREMENTS312, base)


def counts_for(system: str, counts: dict[str, int]) -> dict[str, int]:
    """The workloads of ``counts`` that ``system`` runs."""
    only = ONLY.get(system)
    return {w: n for w, n in counts.items() if only is None or w in only}


def conninfo(url: str) -> str:
    """A libpq connection string for a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def failed(
    system: str, counts: dict[str, int], error: str, backend: str = "postgresql"
) -> list[dict[str, Any]]:
    """One error entry per workload, for a peer that could not run."""
    return [
        {
            "system": system,
            "backend": backend,
            "workload": workload,
            "params": {"jobs": n},
            "metrics": {},
            "runs": [],
            "details": {},
            "error": error,
        }
        for workload, n in counts.items()
    ]


def _drive(
    command: list[str],
    env: dict[str, str],
    system: str,
    counts: dict[str, int],
    backend: str = "postgresql",
) -> list[dict[str, Any]]:
    """Run one peer driver process; the results of its last JSON line, or :func:`failed`'s
    entries (under ``system``) when it exits non-zero, prints no results or times out."""
    try:
        proc = subprocess.run(
            command,
            cwd=BENCH.parent,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            timeout=PEER_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return failed(system, counts, f"the {system} driver timed out", backend)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        error = f"the {system} driver failed (exit {proc.returncode})"
        return failed(system, counts, error, backend)
    results: list[dict[str, Any]] = json.loads(lines[-1])["results"]
    return results


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
        return _drive(command, env, system, counts)
    finally:
        drop_schema(url, schema)


def run_sqlite_peer(
    python: Path,
    system: str,
    *,
    counts: dict[str, int],
    workdir: Path,
    progress: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Run ``counts`` against a SQLite peer (Huey) once per mode of :data:`SQLITE_MODES`,
    each on a fresh database file in ``workdir``; its results."""
    counts = {w: n for w, n in counts.items() if w in SQLITE_WORKLOADS}
    results: list[dict[str, Any]] = []
    if not counts:
        return results
    for mode in SQLITE_MODES:
        name = system if mode == "FULL" else f"{system}-{mode.lower()}"
        db = workdir / f"{name}.sqlite3"
        env = {
            **os.environ,
            "PYTHONPATH": str(BENCH.parent),
            "KICKSIDE_BENCH_HUEY_DB": str(db),
            "KICKSIDE_BENCH_HUEY_SYNCHRONOUS": mode,
            "KICKSIDE_BENCH_HUEY_DONE": str(workdir / f"{name}.done"),
        }
        command = [str(python), "-m", f"bench.peers.{system}_peer", "run"]
        command += ["--workdir", str(workdir), *(f"--count={w}={n}" for w, n in counts.items())]
        progress(f"peers: {name} on SQLite (WAL, synchronous {mode})")
        try:
            results += _drive(command, env, name, counts, "sqlite")
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    return results
