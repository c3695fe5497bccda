"""`kickside worker --metrics-port`: a real worker's Prometheus endpoint, scraped while it runs
jobs, on both backends."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kickside_engine import Database, JobBuilder, JobState, get_job

from ..conftest import Target
from ..support import hooks_app
from ..support.processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(port: int) -> Samples:
    """Every sample of the endpoint, by name and sorted labels ({} while it is not up yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _state(db: Database, job_id: object) -> JobState:
    job = get_job(db, job_id)  # type: ignore[arg-type]
    assert job is not None
    return job.state


def _echo(outcome: str) -> tuple[tuple[str, str], ...]:
    return (("outcome", outcome), ("queue", "default"), ("worker", "echo"))


def test_the_endpoint_counts_jobs_per_queue_worker_and_outcome_while_they_run(
    db: Database, target: Target, tmp_path: Path
) -> None:
    port = _free_port()
    # Jobs on a queue this pool does not run: the backlog gauges see them wait.
    waiting = [JobBuilder("echo", {}).queue("elsewhere").insert(db) for _ in range(3)]
    proc = start_worker(
        target.cli_args(),
        app="tests.support.hooks_app",
        queues="default:2",
        extra=["--metrics-port", str(port)],
        env={"KST_HOOKS_LOG": str(tmp_path / "hooks.log")},
        log=tmp_path / "worker.out",
    )
    try:
        wait_for(lambda: _scrape(port), 60, "the metrics endpoint")
        done = [hooks_app.echo.new({}).insert(db) for _ in range(5)]
        refused = hooks_app.echo.new({"refuse": True}).max_attempts(1).insert(db)
        ok_total = ("kickside_jobs_finished_total", _echo("done"))
        seen = wait_for(
            lambda: (
                (s := _scrape(port)).get(ok_total, 0) >= 5
                and s.get(
                    ("kickside_jobs_discarded_total", (("queue", "default"), ("worker", "echo")))
                )
                and s
            ),
            60,
            "five done and one discarded job in the scrape",
        )
        # Counted when the outcome comes back, recorded by the pool's next turn.
        wait_for(
            lambda: (
                all(_state(db, i.id) is JobState.COMPLETED for i in done)
                and _state(db, refused.id) is JobState.DISCARDED
            ),
            30,
            "the outcomes recorded",
        )
        labels = (("queue", "default"), ("worker", "echo"))
        assert seen[("kickside_jobs_started_total", labels)] == 6
        assert seen[("kickside_jobs_finished_total", _echo("error"))] == 1
        assert seen[("kickside_job_duration_seconds_count", _echo("done"))] == 5
        assert seen[("kickside_job_queue_wait_seconds_count", labels)] == 6
        backlog = wait_for(
            lambda: _scrape(port).get(("kickside_queue_available_jobs", (("queue", "elsewhere"),))),
            30,
            "the backlog gauge",
        )
        assert backlog == len(waiting)
        age = _scrape(port)[
            ("kickside_queue_oldest_available_age_seconds", (("queue", "elsewhere"),))
        ]
        assert age >= 0
    finally:
        assert stop(proc) == 0
    assert "metrics=:" in (tmp_path / "worker.out").read_text()


def test_a_port_in_use_is_one_line_and_exit_2(target: Target, db: Database, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start_worker(
            target.cli_args(),
            app="tests.support.hooks_app",
            extra=["--metrics-port", str(port)],
            log=tmp_path / "worker.out",
        )
        code = proc.wait(60)
    out = (tmp_path / "worker.out").read_text()
    assert code == 2, out
    assert f"cannot serve metrics on 0.0.0.0:{port}" in out and "Traceback" not in out
