"""How Kickside installs and imports: the test helpers without pytest, the pytest plugin."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, *, cwd: Path | None = None) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported yet); return its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_testing_helpers_work_where_pytest_cannot_be_imported(tmp_path: Path) -> None:
    out = _python(
        f"""
        import sys
        sys.modules["pytest"] = sys.modules["_pytest"] = None  # `import pytest` fails
        from kickside_engine import JobBuilder, WorkerRegistry, connect_database, enqueue, migrate
        from kickside_engine.testing import (
            assert_enqueued, drain_jobs, perform_job, refute_enqueued,
        )

        registry = WorkerRegistry()

        @registry.worker("greet")
        def greet(args, job):
            return None

        db = connect_database("sqlite:///{tmp_path / "helpers.sqlite3"}")
        migrate.upgrade(db)
        enqueue(db, JobBuilder("greet", {{"name": "ada"}}))
        assert_enqueued(db, worker=greet, args={{"name": "ada"}})
        print(drain_jobs(db, registry).completed, type(perform_job(greet, {{}})).__name__)
        refute_enqueued(db, worker="greet")
        db.dispose()
        print("pytest" in sys.modules and sys.modules["pytest"] is None)
        """
    )
    assert out.splitlines() == ["1 Done", "True"]


def test_the_kickside_db_fixture_comes_from_the_installed_pytest_plugin(tmp_path: Path) -> None:
    # A project of its own (no conftest, no pytest_plugins): the fixture arrives through the
    # pytest11 entry point, from the plugin module rather than from kickside_engine.testing.
    (tmp_path / "test_uses_fixture.py").write_text(
        textwrap.dedent(
            """
            import sys

            from kickside_engine import JobBuilder, enqueue
            from kickside_engine.testing import assert_enqueued


            def test_fixture(kickside_db, request):
                plugin = request.config.pluginmanager.get_plugin("kickside")
                assert plugin.__name__ == "kickside_engine.pytest_plugin"
                enqueue(kickside_db, JobBuilder("greet", {"name": "ada"}))
                assert_enqueued(kickside_db, worker="greet", count=1)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
