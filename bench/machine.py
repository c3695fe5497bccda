"""What the numbers were measured on: the machine, its load, the versions, and the baselines.

On PostgreSQL: pgbench's single-row INSERT transactions per second from one client into a
trivial table (the reference of the single-enqueue target); the same INSERT sent from Python by
psycopg, the engine's driver (what any Python client reaches for that row); pgbench with
Kickside's own single-enqueue statement into the run's migrated job table (the ceiling for a
one-commit enqueue of that row); and pgbench's simple-update transactions per second from 10
clients (what the server sustains for small concurrent writing transactions).

On SQLite: Kickside's own single-enqueue statement run on sqlite3 with nothing of Python's
around it but the call, at the run's durability (the ceiling for a one-commit enqueue of
Kickside's row on this machine, beside which Huey's whole enqueue is measured).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from sqlalchemy import NullPool, create_engine, make_url, text

from bench.targets import reset
from kickside_engine import Database, JobBuilder
from kickside_engine.clock import utcnow
from kickside_engine.store.sqlite_durability import synchronous_mode

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


def _pgbench(
    url: str, args: list[str], *, schema: str, timeout_seconds: float
) -> tuple[str, str | None]:
    """Run pgbench with ``args`` against ``url``, its tables in ``schema``: (stdout, error)."""
    binary = shutil.which("pgbench")
    if binary is None:
        return "", "pgbench is not installed"
    parsed = make_url(url)
    command = [binary, *args]
    for flag, value in (("-h", parsed.host), ("-p", parsed.port), ("-U", parsed.username)):
        if value:
            command += [flag, str(value)]
    command.append(parsed.database or "postgres")
    env = {**os.environ, "PGOPTIONS": f"-c search_path={schema}"}
    if parsed.password:
        env["PGPASSWORD"] = parsed.password
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_seconds)
    if out.returncode != 0:
        reason = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        return out.stdout, f"pgbench failed: {reason[0]}"
    return out.stdout, None


def _tps(stdout: str) -> float | None:
    match = re.search(r"tps = ([\d.]+)", stdout)
    return float(match.group(1)) if match else None


def pgbench_insert_tps(url: str, schema: str, *, seconds: int) -> dict[str, Any]:
    """pgbench's single-row INSERT rate from one client, into a table in ``schema``.

    Returns ``{"tps": None, "reason": ...}`` when pgbench is not installed or fails.
    """
    if shutil.which("pgbench") is None:
        return {"tps": None, "reason": "pgbench is not installed"}
    tps, error = _one_client(url, schema, _trivial_insert(url, schema), seconds=seconds)
    if error or tps is None:
        return {"tps": None, "reason": error or "pgbench printed no tps"}
    return {"tps": tps, "clients": 1, "seconds": seconds, "script": "INSERT one row"}


def _trivial_insert(url: str, schema: str) -> str:
    """The trivial table's one-row INSERT (the table is made in ``schema`` if missing)."""
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
    return f"INSERT INTO {table} (v) VALUES (1)"


def psycopg_insert_tps(url: str, schema: str, *, seconds: float) -> dict[str, Any]:
    """pgbench's single-row INSERT into the same trivial table, sent from Python by psycopg,
    the engine's driver: one connection in autocommit mode, the constant statement run back to
    back for ``seconds`` (psycopg prepares it from its fifth run).

    Nothing of Kickside's is in the loop: this is what a Python client reaches for the
    simplest one-commit insert on this server, beside pgbench's C client.
    """
    statement = _trivial_insert(url, schema)
    engine = create_engine(url, poolclass=NullPool)
    try:
        raw = engine.raw_connection()
        try:
            driver: Any = raw.driver_connection
            driver.autocommit = True
            count = 0
            started = time.perf_counter()
            deadline = started + seconds
            while time.perf_counter() < deadline:
                driver.execute(statement)
                count += 1
            elapsed = time.perf_counter() - started
        finally:
            raw.close()
    finally:
        engine.dispose()
    return {"tps": count / elapsed, "clients": 1, "seconds": seconds, "script": "INSERT one row"}


def _one_client(
    url: str, schema: str, statement: str, *, seconds: int, prepared: bool = False
) -> tuple[float | None, str | None]:
    """pgbench running ``statement`` (one autocommit transaction each) from one client; with
    ``prepared``, as a prepared statement (``-M prepared``) instead of pgbench's default simple
    protocol, which parses and plans it at every run."""
    mode = ["-M", "prepared"] if prepared else []
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(f"{statement};\n")
    try:
        stdout, error = _pgbench(
            url,
            ["-n", "-c", "1", *mode, "-T", str(seconds), "-f", script.name],
            schema=schema,
            timeout_seconds=seconds + 60,
        )
    finally:
        os.unlink(script.name)
    return _tps(stdout), error


def enqueue_statement(db: Database) -> str:
    """Kickside's single-enqueue statement for a no-op job on ``db``, its parameters written in
    as constants: ``gen_random_uuid()`` for the id (Kickside's own ids are UUIDv7, made by the
    client) and ``now()`` for the timestamps. One line, as pgbench reads it."""
    statement, params = _noop_enqueue(db)
    assert isinstance(params, dict)  # PostgreSQL's are named
    constants = {name: _literal(value) for name, value in params.items()}
    constants["p_id"] = "gen_random_uuid()"
    for name in ("p_inserted_at", "p_scheduled_at", "p_updated_at"):
        constants[name] = "now()"
    for name, constant in constants.items():
        statement = statement.replace(f"%({name})s", constant)
    if "%(" in statement:
        raise ValueError(f"a parameter was left in Kickside's statement: {statement}")
    return " ".join(statement.split())


def _noop_enqueue(db: Database) -> tuple[str, dict[str, Any] | list[Any]]:
    """The statement and parameters ``JobBuilder("noop", {}).insert(db)`` sends to the driver,
    built as the engine builds them (private on purpose: the harness measures that exact
    statement), with a fresh id and the time now."""
    from kickside_engine.job_row import build_row
    from kickside_engine.store.inserts import single_insert_statement

    return single_insert_statement(db, build_row(JobBuilder("noop", {}).options, utcnow()))


def _literal(value: object) -> str:
    """A SQL constant for a parameter of the no-op job's row (others are replaced anyway)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)  # the id and the timestamps, which enqueue_statement replaces


def pgbench_enqueue_tps(url: str, schema: str, *, seconds: int) -> dict[str, Any]:
    """pgbench running Kickside's own single-enqueue statement from one client.

    The statement of ``JobBuilder("noop", {}).insert(db)`` on PostgreSQL (the INSERT into the
    migrated ``kickside_job`` of ``schema``, with its indexes, constraints and NOTIFY) with
    constant values, sent from C as a prepared statement (the engine's driver, psycopg, prepares
    a statement from its fifth run, so the simple protocol's parsing and planning at every run
    would understate the ceiling by a third): the ceiling for a one-commit enqueue of
    Kickside's row on this server. The job tables are emptied afterwards. Returns
    ``{"tps": None, "reason": ...}`` when pgbench is not installed or fails.
    """
    if shutil.which("pgbench") is None:
        return {"tps": None, "reason": "pgbench is not installed"}
    db = Database.from_url(url, schema=schema)
    try:
        statement = enqueue_statement(db)
        try:
            tps, error = _one_client(url, schema, statement, seconds=seconds, prepared=True)
        finally:
            reset(db)
    finally:
        db.dispose()
    if error or tps is None:
        return {"tps": None, "reason": error or "pgbench printed no tps"}
    return {
        "tps": tps,
        "clients": 1,
        "seconds": seconds,
        "script": "Kickside's single-enqueue statement",
        "mode": "prepared",
        "statement": statement,
    }


SQLITE_CEILING_ROWS = 2_000  # as many as workload 2 enqueues
SQLITE_CEILING_ROUNDS = 5


def sqlite_enqueue_ceiling(url: str, *, rounds: int = SQLITE_CEILING_ROUNDS) -> dict[str, Any]:
    """Kickside's single-enqueue statement on sqlite3, one commit per row, nothing else timed.

    The statement and converted parameters of ``JobBuilder("noop", {}).insert(db)`` on the
    SQLite file at ``url`` (its INSERT into the migrated ``kickside_job`` with its indexes
    and constraints), each row's own (fresh id, its instants), built before the clock starts;
    then :data:`SQLITE_CEILING_ROWS` executes on the sqlite3 connection under one of the
    engine's own (WAL, the URL's ``synchronous``, foreign keys, busy timeout), each its own
    transaction: what a one-commit enqueue of Kickside's row costs SQLite itself on this
    machine, the ceiling of the single-enqueue figure. Median of ``rounds``; the job tables are
    emptied afterwards.
    """
    db = Database.from_url(url)
    rates: list[float] = []
    statement = ""
    try:
        mode = synchronous_mode(make_url(url))
        # The engine's own connection: its connect hook tuned it as every Kickside connection.
        pooled = db.engine.raw_connection()
        try:
            raw = pooled.driver_connection
            assert raw is not None  # checked out: the connection is open
            for _ in range(rounds):
                built = [_noop_enqueue(db) for _ in range(SQLITE_CEILING_ROWS)]
                statement = built[0][0]
                started = time.perf_counter()
                for sql, params in built:
                    raw.execute(sql, params)
                rates.append(len(built) / (time.perf_counter() - started))
        finally:
            pooled.close()
            reset(db)
    finally:
        db.dispose()
    return {
        "tps": statistics.median(rates),
        "rounds": [round(rate, 1) for rate in rates],
        "rows": SQLITE_CEILING_ROWS,
        "synchronous": mode,
        "script": "Kickside's single-enqueue statement on sqlite3",
        "statement": " ".join(statement.split()),
    }


UPDATE_CLIENTS = 10


def pgbench_update_tps(url: str, schema: str, *, seconds: int) -> dict[str, Any]:
    """pgbench's built-in simple-update script (``-N``) from 10 clients (``-j 2``).

    Its tables (``pgbench -i``, scale 1) go into ``schema``. Returns ``{"tps": None,
    "reason": ...}`` when pgbench is not installed or fails.
    """
    _, error = _pgbench(url, ["-i", "-q", "-s", "1"], schema=schema, timeout_seconds=300)
    if error:
        return {"tps": None, "reason": error}
    args = ["-n", "-N", "-c", str(UPDATE_CLIENTS), "-j", "2", "-T", str(seconds)]
    stdout, error = _pgbench(url, args, schema=schema, timeout_seconds=seconds + 60)
    tps = _tps(stdout)
    if error or tps is None:
        return {"tps": None, "reason": error or "pgbench printed no tps"}
    return {
        "tps": tps,
        "clients": UPDATE_CLIENTS,
        "threads": 2,
        "seconds": seconds,
        "script": "simple-update (-N), scale 1",
    }
