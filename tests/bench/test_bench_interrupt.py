"""A benchmark stopped by SIGTERM cleans up after itself, as one stopped by Ctrl-C does.

Without this, SIGTERM ended ``python -m bench.run`` where it stood: its PostgreSQL schema (with
its jobs) and its pool process stayed behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import weakref
from pathlib import Path

import pytest

from bench import interrupt
from bench.interrupt import TERMINATED, exit_on_sigterm
from bench.workloads.common import wait_until

from ..conftest import PG_URL, _drop_schema, require_postgres, schema_exists

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _pool_processes(schema: str) -> list[int]:
    """PIDs of live pool host processes of this run (Linux: read from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile
        if b"bench.workloads.poolhost" in args and schema.encode() in args and state != "Z":
            found.append(int(entry.name))
    return found


def test_sigterm_in_the_middle_of_a_drain_drops_the_schema_and_stops_the_pool(
    tmp_path: Path,
) -> None:
    require_postgres()
    schema = f"kst_{uuid.uuid4().hex[:16]}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.run",
            # Full size: a quick drain (1,000 jobs a run) could end before the signal lands.
            "--only",
            "drain",
            "--backend",
            "postgresql",
            "--database-url",
            PG_URL,
            "--schema",
            schema,
            "--results-dir",
            str(tmp_path / "results"),
            "--no-peers",
            "--no-pgbench",
            "--no-plot",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # progress lines; the pool is up once a run has begun
            seen.append(line)
            if "drain: run 1/" in line:
                break
        else:
            pytest.fail("the run ended before its drain began:\n" + "".join(seen[-20:]))
        assert schema_exists(schema) and _pool_processes(schema)
        proc.send_signal(signal.SIGTERM)
        proc.stderr.read()
        assert proc.wait(120) == TERMINATED
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()
        leftover = schema_exists(schema)
        _drop_schema(schema)
    assert not leftover
    deadline = time.monotonic() + 30
    while _pool_processes(schema) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _pool_processes(schema)


def test_a_sigterm_lost_in_a_weakref_callback_still_stops_the_run() -> None:
    """The handler's raise lands in whatever Python code runs when the signal is handled: in a
    garbage collector's weakref callback, Python reports it as "Exception ignored" and goes on
    (a full run under load then went to its end and exited 0). The run's polling loop raises
    it again."""
    previous = signal.getsignal(signal.SIGTERM)
    exit_on_sigterm()
    try:

        class Held:
            pass

        def on_collected(_ref: object) -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # bytecode to run on: the handler raises in here
                pass

        lost: list[BaseException | None] = []
        hook = sys.unraisablehook
        sys.unraisablehook = lambda info: lost.append(info.exc_value)
        try:
            held = Held()
            ref = weakref.ref(held, on_collected)
            del held  # the callback runs, and the SystemExit raised in it is lost
        finally:
            sys.unraisablehook = hook
        assert ref() is None
        assert [type(e) for e in lost] == [SystemExit]
        with pytest.raises(SystemExit) as stopped:
            wait_until(lambda: False, timeout_seconds=5, what="nothing", interval_seconds=0.01)
        assert stopped.value.code == TERMINATED
    finally:
        signal.signal(signal.SIGTERM, previous)
        interrupt._terminated = False
