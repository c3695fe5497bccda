"""A rolling upgrade across a migration: the previous release and this one run side by side.

The previous release is the commit before the newest revision was added (from git history,
checked out into a temporary worktree and run with this venv's Python). While jobs flow:

1. the previous release migrates the database to its head and runs a pool;
2. this release's pool starts on that old schema (before ``migrate``) and runs jobs too;
3. ``kickside migrate status`` names the running nodes the upgrade could stop;
4. this release migrates; the previous release's pool restarts on the new schema and runs;
5. every job completes exactly once.

Steps 2 and 4 hold for expand steps, as the newest revision is today; for a release that
declares otherwise (a contract step, or code that needs the new schema) the test checks that
the pool is refused with both revisions named instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, MigrationError, enqueue, migrate
from kickside_engine.store.tables import build_tables

from ..conftest import Target
from ..support.processes import ROOT, stop, wait_for

pytestmark = pytest.mark.slow

VERSIONS = "kickside_engine/migrations/versions"

APP = """
import os

from kickside_engine import WorkerRegistry

registry = WorkerRegistry()
KICKSIDE_CODE_VERSION = os.environ["ROLLING_RELEASE"]


@registry.worker("tick")
def tick(args, job):
    return None
"""


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _previous_release_commit() -> str:
    """The commit before the newest revision file was added."""
    if _git("rev-parse", "--is-shallow-repository") == "true":
        pytest.fail("the rolling-upgrade test needs the full git history: fetch with --unshallow")
    added = _git("log", "--format=%H", "--diff-filter=A", "-1", "--", f"{VERSIONS}/0*.py")
    if not added:
        pytest.fail(f"no commit in this clone's history adds a revision under {VERSIONS}")
    previous = _git("rev-parse", f"{added}^")
    if "oldest_code_head" not in _git("show", f"{previous}:kickside_engine/store/revisions.py"):
        pytest.fail(
            f"the previous release {previous[:10]} predates expand/contract "
            "(store/revisions.py has no oldest_code_head): it cannot run on a newer schema"
        )
    return previous


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A worktree of the previous release, removed afterwards."""
    commit = _previous_release_commit()
    path = tmp_path_factory.mktemp("release") / "previous"
    _git("worktree", "add", "--detach", str(path), commit)
    try:
        yield path
    finally:
        _git("worktree", "remove", "--force", str(path))


class Release:
    """Runs the `kickside` CLI of one release's code (this venv's Python, its sources first)."""

    def __init__(self, name: str, code: Path, app_dir: Path, target: Target, logs: Path):
        self.name, self.code, self.target, self.logs = name, code, target, logs
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(code), str(app_dir)]),
            "ROLLING_RELEASE": name,
        }

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kickside_tui.cli", *self.target.cli_args(), *args],
            cwd=self.code,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def enqueue(self, target: Target, jobs: int, queue: str = "default") -> None:
        """Enqueue ``jobs`` tick jobs into ``queue`` with this release's engine."""
        code = (
            "import sys\n"
            "from kickside_engine import JobBuilder, connect_database, enqueue\n"
            "db = connect_database(sys.argv[1], schema=sys.argv[2] or None)\n"
            f"for n in range({jobs}):\n"
            f"    enqueue(db, JobBuilder('tick', {{'n': n, 'by': 'previous'}}, queue={queue!r}))\n"
        )
        subprocess.run(
            [sys.executable, "-c", code, target.url, target.schema or ""],
            cwd=self.code,
            env=self.env,
            check=True,
            timeout=120,
        )

    def head(self) -> str:
        code = "from kickside_engine import migrate; print(migrate.head_revision())"
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.code,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    def pool(self, node: str) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{node}.log", "ab") as out:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kickside_tui.cli",
                    *self.target.cli_args(),
                    "worker",
                    "--app",
                    "rolling_app",
                    "--queues",
                    f"default:2,{node}:2",  # its own queue: jobs only it may run (_runs_more)
                    "--node",
                    node,
                ],
                cwd=self.code,
                env=self.env,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )


class Enqueuer:
    """Enqueues a job every few milliseconds from its own handle until stopped (this release's
    application: while the schema refuses its code, it waits for the migration)."""

    def __init__(self, target: Target):
        self.db = target.open()
        self.count = 0
        self.refused = 0
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self.halt.wait(0.02):
                try:
                    enqueue(self.db, JobBuilder("tick", {"n": self.count}))
                except MigrationError:
                    self.refused += 1
                    continue
                self.count += 1
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> int:
        self.halt.set()
        self.thread.join(30)
        self.db.dispose()
        assert self.error is None, f"enqueueing failed: {self.error}"
        return self.count


def _completed_by_node(db: Database) -> dict[str, int]:
    run = db.tables.job_run
    with db.read(check_schema=False) as conn:
        rows = conn.execute(
            sa.select(run.c.node, sa.func.count())
            .where(run.c.outcome == "completed")
            .group_by(run.c.node)
        )
        return {node: int(n) for node, n in rows}


class Feeder:
    """Jobs for one node's own queue, enqueued by this release where the schema accepts it,
    else by the previous one: the shared queue alone could starve a pool that only polls (a
    pool woken at once by each enqueue takes every job first)."""

    def __init__(self, db: Database, previous: Release, target: Target):
        self.db, self.previous, self.target = db, previous, target
        self.count = 0

    def __call__(self, node: str, jobs: int = 3) -> None:
        try:
            for n in range(jobs):
                enqueue(self.db, JobBuilder("tick", {"n": n, "for": node}, queue=node))
        except MigrationError:
            self.previous.enqueue(self.target, jobs, queue=node)
        self.count += jobs


def _runs_more(
    db: Database,
    pools: dict[str, subprocess.Popen[bytes]],
    logs: Path,
    node: str,
    than: int = 0,
    *,
    feed: Feeder,
) -> None:
    """Wait until ``node`` completed a few more jobs; fail at once with its log if it exits."""
    feed(node)

    def ran() -> bool:
        if pools[node].poll() is not None:
            log = (logs / f"{node}.log").read_text()[-3000:]
            pytest.fail(f"{node} exited with {pools[node].returncode}:\n{log}")
        return _completed_by_node(db).get(node, 0) > than + 2 and _own_queue_done(db, node)

    wait_for(ran, timeout=60, what=f"{node} to run jobs")


def _pool_exits_cleanly(proc: subprocess.Popen[bytes], logs: Path, node: str) -> None:
    code = stop(proc, signal.SIGTERM)
    assert code == 0, (logs / f"{node}.log").read_text()[-3000:]


def test_old_and_new_pools_run_side_by_side_across_the_migration(
    previous_release: Path, target: Target, empty_db: Database, tmp_path: Path
) -> None:
    (tmp_path / "rolling_app.py").write_text(textwrap.dedent(APP))
    old = Release("previous", previous_release, tmp_path, target, tmp_path)
    new = Release("current", ROOT, tmp_path, target, tmp_path)
    old_head, new_head = old.head(), new.head()
    order = migrate.revisions().index
    assert order(old_head) < order(new_head)
    # What the two releases declare (expand steps make both true; the test checks either way).
    new_runs_on_old = order(migrate.OLDEST_SCHEMA) <= order(old_head)
    old_runs_on_new = migrate.runs_on(old_head, new_head)

    migrated = old.cli("migrate")
    assert migrated.returncode == 0, migrated.stderr
    old.enqueue(target, 5)  # the previous release's application enqueues too
    enqueuer = Enqueuer(target)
    enqueuer.thread.start()
    feed = Feeder(empty_db, old, target)
    pools = {"old-1": old.pool("old-1")}
    try:
        _runs_more(empty_db, pools, tmp_path, "old-1", feed=feed)
        # This release's pool starts before `migrate` ran.
        pools["new-1"] = new.pool("new-1")
        if new_runs_on_old:
            _runs_more(empty_db, pools, tmp_path, "new-1", feed=feed)
        else:
            _refused(pools.pop("new-1"), tmp_path, "new-1", old_head, migrate.OLDEST_SCHEMA)

        status = new.cli("migrate", "status", "--json")
        assert status.returncode == 1, status.stderr  # an upgrade is pending
        report = json.loads(status.stdout)
        assert report["current"] == old_head and report["head"] == new_head
        assert report["oldest_code_head"] == migrate.code_floor(new_head)
        assert {n["name"] for n in report["stopped_by_upgrade"]} == _at_risk(
            pools, old_head, old_runs_on_new
        )

        upgraded = new.cli("migrate")
        assert upgraded.returncode == 0, upgraded.stderr
        before = _completed_by_node(empty_db)
        for node in pools:  # running pools carry on (they checked the schema at their start)
            _runs_more(empty_db, pools, tmp_path, node, before.get(node, 0), feed=feed)

        # The previous release restarts on the new schema: accepted there, or refused.
        _pool_exits_cleanly(pools.pop("old-1"), tmp_path, "old-1")
        pools["old-2"] = old.pool("old-2")
        if old_runs_on_new:
            _runs_more(empty_db, pools, tmp_path, "old-2", feed=feed)
        else:
            _refused(pools.pop("old-2"), tmp_path, "old-2", new_head, migrate.code_floor(new_head))
        if "new-1" in pools:
            _pool_exits_cleanly(pools.pop("new-1"), tmp_path, "new-1")
        pools["new-2"] = new.pool("new-2")
        _runs_more(empty_db, pools, tmp_path, "new-2", feed=feed)
        assert new.cli("migrate", "status").returncode == 0  # nothing pending any more

        total = enqueuer.stop() + 5 + feed.count
        assert enqueuer.refused == 0 or not new_runs_on_old
        wait_for(lambda: _all_final(empty_db) == total, timeout=60, what="the backlog to drain")
        for node in list(pools):
            _pool_exits_cleanly(pools.pop(node), tmp_path, node)
    finally:
        enqueuer.halt.set()
        for proc in pools.values():
            stop(proc)

    assert _all_final(empty_db) == total
    run = empty_db.tables.job_run
    with empty_db.read() as conn:
        per_job = conn.execute(
            sa.select(run.c.job_id, sa.func.count()).group_by(run.c.job_id)
        ).all()
        versions = set(conn.execute(sa.select(run.c.code_version).distinct()).scalars())
    assert len(per_job) == total and all(n == 1 for _, n in per_job)  # once each
    assert versions == {"previous", "current"}


def _at_risk(pools: dict[str, subprocess.Popen[bytes]], old_head: str, old_runs: bool) -> set[str]:
    """The running nodes `migrate status` must name: those that cannot publish their schema
    head (the column came with 0007), else the previous release's when it would be refused."""
    published_from = build_tables(None).node.c.schema_head.info["since"]
    if migrate.revisions().index(old_head) < migrate.revisions().index(published_from):
        return set(pools)
    return set() if old_runs else {n for n in pools if n.startswith("old-")}


def _refused(proc: subprocess.Popen[bytes], logs: Path, node: str, *revisions: str) -> None:
    """The pool exits 1 at once, its one-line error naming both revisions."""
    assert proc.wait(60) == 1
    log = (logs / f"{node}.log").read_text()
    assert all(revision in log for revision in revisions), log[-2000:]


def _own_queue_done(db: Database, node: str) -> bool:
    """Whether every job fed to ``node``'s own queue completed (none is left for a pool that
    stops: no other pool serves that queue)."""
    job = db.tables.job
    with db.read(check_schema=False) as conn:
        left = conn.execute(
            sa.select(sa.func.count()).where(job.c.queue == node, job.c.state != "completed")
        ).scalar_one()
    return int(left) == 0


def _all_final(db: Database) -> int:
    job = db.tables.job
    with db.read(check_schema=False) as conn:
        count = conn.execute(
            sa.select(sa.func.count()).where(job.c.state == "completed")
        ).scalar_one()
    return int(count)
