"""How Kickside installs and imports: the test helpers without pytest, the pytest plugin, lazy
imports, the wheel's migrations and the ``alembic`` command from the repository root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import migrate

from .conftest import Target

ROOT = Path(__file__).resolve().parents[1]
ALEMBIC = Path(sys.executable).with_name("alembic")


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


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and sdist, built from a copy of the tree (``python -m build``, isolated)."""
    base = tmp_path_factory.mktemp("dist")
    source = base / "src"  # a copy: building in the worktree would leave build/ behind
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("kickside_engine", "kickside_tui"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--sdist",
            "--wheel",
            "--outdir",
            str(base / "out"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return base / "out"


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("kickside-*.whl")
    return wheel


@pytest.mark.slow
def test_the_built_wheel_ships_every_migration_revision(dist: Path) -> None:
    shipped = set(zipfile.ZipFile(_wheel(dist)).namelist())
    migrations = ROOT / "kickside_engine" / "migrations"
    revisions = sorted(p.name for p in (migrations / "versions").glob("*.py"))
    assert len(revisions) >= 6  # __init__.py and 0001...
    wanted = {f"kickside_engine/migrations/versions/{name}" for name in revisions} | {
        "kickside_engine/migrations/__init__.py",
        "kickside_engine/migrations/env.py",
        "kickside_engine/migrations/script.py.mako",
        "kickside_engine/pytest_plugin.py",
        "kickside_engine/py.typed",
        "kickside_tui/app.tcss",
    }
    assert wanted - shipped == set()


@pytest.mark.slow
def test_the_wheel_and_sdist_metadata_pass_twine_check(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert any(f.endswith(".tar.gz") for f in files) and any(f.endswith(".whl") for f in files)
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    metadata = (
        zipfile.ZipFile(_wheel(dist))
        .read(next(n for n in zipfile.ZipFile(_wheel(dist)).namelist() if n.endswith("METADATA")))
        .decode()
    )
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = sorted(line.split()[1].split(">")[0] for line in requires if "extra ==" not in line)
    # The engine alone, on SQLite; cattrs decodes dataclass args (a core feature, pure Python).
    assert core == ["SQLAlchemy", "alembic", "cattrs", "cronsim"]
    for extra in ("postgres", "cli", "tui", "async", "metrics", "otel", "all"):
        assert f"Provides-Extra: {extra}" in metadata
    assert "psycopg-pool" not in metadata  # declared once, never imported


def _venv(path: Path) -> Path:
    """A fresh virtual environment (its own pip); the path of its ``bin``."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path / "bin"


def _run(
    command: list[str], *, cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KICKSIDE_", "VIRTUAL_ENV"))}
    env["KICKSIDE_HOME"] = str(cwd / "home")
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


ONE_JOB = """
    import sys
    from kickside_engine import JobBuilder, WorkerRegistry, connect_database, enqueue, migrate
    from kickside_engine.testing import drain_jobs

    registry = WorkerRegistry()

    @registry.worker("greet")
    def greet(args, job):
        print("hello", args["name"])

    db = connect_database("sqlite:///engine-only.sqlite3")
    migrate.upgrade(db)
    enqueue(db, JobBuilder("greet", {"name": "ada"}))
    print("completed", drain_jobs(db, registry).completed)
    db.dispose()
    for name in ("typer", "rich", "textual", "psycopg"):
        try:
            __import__(name)
        except ImportError:
            print("absent", name)
    from kickside_engine import ConfigurationError
    try:
        connect_database("postgresql+psycopg://app:s3cret@db.example/app")
    except ConfigurationError as exc:
        print(exc)
"""


@pytest.mark.slow
def test_the_engine_alone_installs_from_the_wheel_and_each_extra_adds_its_command(
    dist: Path, tmp_path: Path
) -> None:
    """``pip install kickside``: the engine runs a job on SQLite with none of the extras; the
    scripts name the extra they need; ``kickside[cli]`` then gives a working CLI."""
    bin_ = _venv(tmp_path / "venv")
    pip = [str(bin_ / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    done = _run([*pip, str(_wheel(dist))], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]

    done = _run([str(bin_ / "python"), "-c", textwrap.dedent(ONE_JOB)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "hello ada",
        "completed 1",
        "absent typer",
        "absent rich",
        "absent textual",
        "absent psycopg",
        "no driver for postgresql+psycopg://app:***@db.example/app: PostgreSQL needs psycopg, "
        "which the postgres extra installs: pip install 'kickside[postgres]'",
    ]

    for command, extra in (("kickside", "cli"), ("kickside-tui", "tui")):
        done = _run([str(bin_ / command), "--help"], cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert (
            done.stderr.strip()
            .splitlines()[-1]
            .endswith(f"which the {extra} extra installs: pip install 'kickside[{extra}]'")
        ), done.stderr
        assert "Traceback" not in done.stderr

    done = _run([*pip, f"{_wheel(dist)}[cli]"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = _run([str(bin_ / "kickside"), "--help"], cwd=tmp_path)
    assert done.returncode == 0 and "migrate" in done.stdout, done.stderr
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    done = _run([str(bin_ / "kickside"), "--database-url", url, "migrate"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = _run(
        [str(bin_ / "kickside"), "--database-url", url, "demo", "--dashboard"], cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'kickside[tui]'" in done.stderr and "Traceback" not in done.stderr


def _alembic(target: Target, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``alembic`` command, run from the repository root on ``target``'s database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KICKSIDE_")}
    env["KICKSIDE_DATABASE_URL"] = target.url
    if target.schema:
        env["KICKSIDE_SCHEMA"] = target.schema
    return subprocess.run(
        [str(ALEMBIC), "-c", "alembic.ini", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_alembic_from_the_repository_root_migrates_and_finds_the_schema_current(
    target: Target,
) -> None:
    """``alembic upgrade head`` then ``alembic check``, as a developer runs them from the root.

    The database is the one Kickside is configured for (``KICKSIDE_DATABASE_URL``), the version
    table Kickside's own, and autogenerate compares the store's metadata with Kickside's tables
    only: a host application's table is not proposed for removal, a missing index is found.
    """
    upgraded = _alembic(target, "upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    db = target.open()
    try:
        assert migrate.status(db).up_to_date  # what Kickside reads: kickside_alembic_version
        with db.begin() as conn:
            names = set(sa.inspect(conn).get_table_names(schema=db.schema))
            assert "kickside_alembic_version" in names and "alembic_version" not in names
            sa.Table(
                "app_users", sa.MetaData(schema=db.schema), sa.Column("id", sa.Integer)
            ).create(conn)
        checked = _alembic(target, "check")
        assert checked.returncode == 0, checked.stderr
        assert "No new upgrade operations detected" in checked.stdout + checked.stderr

        with db.begin() as conn:
            (index,) = (
                i for i in db.tables.audit.indexes if i.name == "ix_kickside_audit_target_id"
            )
            conn.execute(sa.schema.DropIndex(index))
        drifted = _alembic(target, "check")
        assert drifted.returncode != 0
        assert "ix_kickside_audit_target_id" in drifted.stdout + drifted.stderr
    finally:
        db.dispose()


def test_the_engine_imports_and_makes_ids_where_the_platform_has_no_fork(tmp_path: Path) -> None:
    out = _python(
        f"""
        import os
        del os.fork, os.register_at_fork  # as on Windows
        from kickside_engine import JobBuilder, connect_database, enqueue, migrate
        db = connect_database("sqlite:///{tmp_path / "nofork.sqlite3"}")
        migrate.upgrade(db)
        first, second = (enqueue(db, JobBuilder("greet", {{}})).id for _ in range(2))
        print(first != second)
        db.dispose()
        """
    )
    assert out == "True"
