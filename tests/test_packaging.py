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


def test_importing_the_engine_loads_neither_alembic_nor_the_operator_api(tmp_path: Path) -> None:
    out = _python(
        f"""
        import sys, types
        import kickside_engine

        def loaded():
            heavy = ("alembic", "sqlalchemy", "kickside_engine.control", "kickside_engine.migrate")
            return ",".join(m for m in heavy if m in sys.modules) or "-"

        print(loaded())
        from kickside_engine import JobBuilder, connect_database, enqueue  # what an app imports
        print(loaded())
        for name in kickside_engine.__all__:  # every public name resolves
            assert getattr(kickside_engine, name) is not None, name
        assert set(kickside_engine.__all__) <= set(dir(kickside_engine))
        assert isinstance(kickside_engine.control, types.ModuleType)
        db = connect_database("sqlite:///{tmp_path / "lazy.sqlite3"}")
        print(kickside_engine.migrate.upgrade(db).up_to_date)
        from kickside_engine import migrate
        print(migrate is sys.modules["kickside_engine.migrate"], loaded())
        db.dispose()
        """
    )
    assert out.splitlines() == [
        "-",
        "sqlalchemy",
        "True",
        "True alembic,sqlalchemy,kickside_engine.control,kickside_engine.migrate",
    ]


def test_a_function_keeps_its_name_when_its_same_named_module_is_imported_first() -> None:
    # `enqueue` is a function in the module kickside_engine.enqueue, and the import system binds
    # a module on its package when it loads it.
    out = _python(
        """
        import kickside_engine.enqueue  # the module, before anything used the name
        from kickside_engine import enqueue
        import kickside_engine
        print(enqueue.__name__, type(kickside_engine.enqueue).__name__)
        """
    )
    assert out == "enqueue function"


def test_all_lists_exactly_the_lazily_exported_names() -> None:
    import kickside_engine

    exported = set(kickside_engine._EXPORTS) | kickside_engine._SUBMODULES
    assert sorted(kickside_engine.__all__) == sorted(exported)
