"""Progress displays only on a terminal: piped stderr carries warnings and errors alone.

Under the CLI runner stderr is not a terminal, as in a script or a cron job.
"""

from __future__ import annotations

from datetime import timedelta

from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, cancel_job
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()


def test_bulk_actions_and_prune_print_no_progress_when_stderr_is_not_a_terminal(
    db: Database, target: Target
) -> None:
    later = timedelta(hours=1)
    enqueue_many(db, [JobBuilder("ok", {"n": n}).queue("q").schedule_in(later) for n in range(3)])
    enqueue_many(db, [JobBuilder("ok", {"n": n}).queue("r").schedule_in(later) for n in range(3)])
    old = enqueue_many(db, [JobBuilder("ok", {"n": n}).queue("old") for n in range(2)])
    for job in old:
        cancel_job(db, job.id, Actor("test", "localhost"), utcnow() - timedelta(days=30))
    for argv, said in (
        (["bulk", "retry", "--queue", "q", "--yes"], "retry: 3 changed"),
        (["bulk", "discard", "--queue", "r", "--yes"], "discard: 3 changed"),
        (["prune", "--older-than-days", "7", "--yes"], "deleted 2 final jobs"),
    ):
        result = runner.invoke(app, [*target.cli_args(), *argv])
        assert result.exit_code == 0, (argv, result.output)
        assert said in result.stdout, result.stdout
        assert result.stderr == "", (argv, result.stderr)
