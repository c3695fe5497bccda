"""What the numbers were measured on: the machine, its load, the versions, and a pgbench
baseline (single-row INSERT transactions per second from one client: the ceiling for
one-commit-per-job enqueue on this server).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sqlite3
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, make_url, text

LOAD_WARNING = 1.0


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, memory, OS and the load averages now."""
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
        "memory_kb": _int(_proc_field("/proc/meminfo", "MemTotal")),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def load_warning(load_average: list[float]) -> str | None:
    """A loud warning when the 1-minute load average says the machine is busy."""
    if load_average[0] <= LOAD_WARNING:
        return None
    return (
        f"the 1-minute load average was {load_average[0]:.2f} (> {LOAD_WARNING}) at start: "
        "something else is using the CPU, so these numbers are unreliable"
    )


def _proc_field(path: str, name: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == name:
                return value.strip()
    except OSError:
        pass
    return None


def _int(value: str | None) -> int | None:
    match = re.match(r"\d+", value or "")
    return int(match.group()) if match else None


def versions(postgres_url: str | None) -> dict[str, str | None]:
    """Versions of Kickside, its drivers, and the database servers."""
    found: dict[str, str | None] = {}
    for dist in ("kickside", "SQLAlchemy", "psycopg", "alembic"):
        try:
            found[dist.lower()] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist.lower()] = None
    found["sqlite"] = sqlite3.sqlite_version
    found["postgresql"] = None
    if postgres_url:
        engine = create_engine(postgres_url)
        try:
            with engine.connect() as conn:
                found["postgresql"] = str(conn.execute(text("SHOW server_version")).scalar())
        finally:
            engine.dispose()
    return found


def pgbench_insert_tps(url: str, schema: str, *, seconds: int) -> dict[str, Any]:
    """pgbench's single-row INSERT rate from one client, into a table in ``schema``.

    Returns ``{"tps": None, "reason": ...}`` when pgbench is not installed or fails.
    """
    binary = shutil.which("pgbench")
    if binary is None:
        return {"tps": None, "reason": "pgbench is not installed"}
    table = f'"{schema}".bench_pgbench_insert'
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    f"CREATE TABLE IF NOT EXISTS {table} "
                    "(id bigserial PRIMARY KEY, v integer NOT NULL, at timestamptz DEFAULT now())"
                )
            )
    finally:
        engine.dispose()
    parsed = make_url(url)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(f"INSERT INTO {table} (v) VALUES (1);\n")
    command = [binary, "-n", "-c", "1", "-T", str(seconds), "-f", script.name]
    for flag, value in (("-h", parsed.host), ("-p", parsed.port), ("-U", parsed.username)):
        if value:
            command += [flag, str(value)]
    command.append(parsed.database or "postgres")
    env = {**os.environ}
    if parsed.password:
        env["PGPASSWORD"] = parsed.password
    try:
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=seconds + 60)
    finally:
        os.unlink(script.name)
    match = re.search(r"tps = ([\d.]+)", out.stdout)
    if out.returncode != 0 or match is None:
        reason = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"tps": None, "reason": f"pgbench failed: {reason[0]}"}
    return {"tps": float(match.group(1)), "clients": 1, "seconds": seconds}
