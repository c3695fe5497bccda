"""Configuration: flag > KICKSIDE_* > kickside.toml or [tool.kickside] > default, shown by
`kickside config`, and used by `kickside worker` and every command that opens the database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kickside_engine.runtime import CONFIG_ENV, OPTIONS
from kickside_tui.cli.main import app

from ..support.processes import ROOT, stop, wait_for

runner = CliRunner()
SECRET = "hunter2"


@pytest.fixture(autouse=True)
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No KICKSIDE_* variable from outside; the current directory a fresh one."""
    for option in OPTIONS:
        monkeypatch.delenv(option.env or "", raising=False)
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv("KICKSIDE_HOME", str(tmp_path / "home"))
    work = tmp_path / "app"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def kickside(*argv: str) -> Result:
    return runner.invoke(app, list(argv))


def effective(*argv: str) -> dict[str, Any]:
    """`kickside config --json`: option name -> its entry."""
    result = kickside("config", "--json", *argv)
    assert result.exit_code == 0, result.output
    return {o["name"]: o for o in json.loads(result.stdout)["options"]}


def one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- precedence ---------------------------------------------------------------------------------

#: Per option type: (option, flag args, environment value, file line, the value each gives).
LEVELS = [
    ("lease", ["--lease", "2m"], "90s", 'lease = "45s"', (120.0, 90.0, 45.0, 30.0)),
    (
        "queues",
        ["--queues", "a:1"],
        "b:2",
        "queues = { c = 3 }",
        ({"a": 1}, {"b": 2}, {"c": 3}, {"default": 10, "mailers": 5}),
    ),
    ("in_process", ["--no-in-process"], "1", "in_process = true", (False, True, True, False)),
    ("prefetch", ["--prefetch", "0"], "4", "prefetch = 7", (0, 4, 7, None)),
    ("shutdown_grace", ["--shutdown-grace", "0"], "5s", "shutdown_grace = 12",
     (0.0, 5.0, 12.0, 25.0)),
    ("log_level", ["--log-level", "debug"], "error", 'log_level = "warning"',
     ("DEBUG", "ERROR", "WARNING", "INFO")),
    ("log_format", ["--log-format", "JSON"], "json", 'log_format = "json"',
     ("json", "json", "json", "text")),
    ("metrics_port", ["--metrics-port", "9464"], "9465", "metrics_port = 9466",
     (9464, 9465, 9466, None)),
    ("queue_leases", ["--queue-leases", "a=5m"], "b=1m", 'queue_leases = { c = "2h" }',
     ({"a": 300.0}, {"b": 60.0}, {"c": 7200.0}, None)),
    ("schema", ["--schema", "flagged"], "from_env", 'schema = "from_file"',
     ("flagged", "from_env", "from_file", None)),
    ("read_only", ["--no-read-only"], "true", "read_only = true", (False, True, True, False)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "flag", "env", "line", "values"), LEVELS, ids=[x[0] for x in LEVELS]
)
def test_each_level_wins_over_the_next(
    name: str,
    flag: list[str],
    env: str,
    line: str,
    values: tuple[Any, Any, Any, Any],
    clean: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    option = next(o for o in OPTIONS if o.name == name)
    table = "" if option.section is None else "[worker]\n"
    (clean / "kickside.toml").write_text(f"{table}{line}\n")
    monkeypatch.setenv(option.env or "", env)
    given = effective(*flag)[name]
    assert (given["value"], given["source"], given["origin"]) == (values[0], "flag", option.flag)
    from_env = effective()[name]
    assert (from_env["value"], from_env["source"]) == (values[1], "env")
    assert from_env["origin"] == option.env
    monkeypatch.delenv(option.env or "")
    from_file = effective()[name]
    assert (from_file["value"], from_file["source"]) == (values[2], "file")
    assert from_file["origin"] == f"{clean / 'kickside.toml'}:{option.key}"
    (clean / "kickside.toml").unlink()
    default = effective()[name]
    assert (default["value"], default["source"], default["origin"]) == (
        values[3],
        "default",
        "default",
    )


def test_a_global_option_after_the_command_is_a_flag_too(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean / "kickside.toml").write_text('schema = "from_file"\n')
    monkeypatch.setenv("KICKSIDE_SCHEMA", "from_env")
    result = kickside("config", "--json", "--schema", "after")
    assert result.exit_code == 0, result.output
    (schema,) = [o for o in json.loads(result.stdout)["options"] if o["name"] == "schema"]
    assert (schema["value"], schema["source"]) == ("after", "flag")


def test_the_worker_command_takes_exactly_the_tables_worker_options() -> None:
    import typer.main

    command = typer.main.get_command(app).commands["worker"]  # type: ignore[attr-defined]
    shown = {p.name for p in command.params if not p.hidden} - {
        "help", "show_help", "global_database_url", "global_schema", "global_read_only",
        "global_config_file", "global_wide",
    }  # fmt: skip
    assert shown == {o.name for o in OPTIONS if o.section == "worker"}


# --- discovery ----------------------------------------------------------------------------------


def test_pyproject_tool_kickside_is_found_from_a_subdirectory(clean: Path) -> None:
    (clean / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.kickside]\nschema = "app"\n\n'
        '[tool.kickside.worker]\nlease = "1m"\n'
    )
    (clean / "src" / "app").mkdir(parents=True)
    os.chdir(clean / "src" / "app")
    options = effective()
    assert options["lease"]["value"] == 60.0
    assert options["lease"]["origin"] == f"{clean / 'pyproject.toml'}:tool.kickside.worker.lease"
    assert options["schema"]["origin"] == f"{clean / 'pyproject.toml'}:tool.kickside.schema"


def test_kickside_toml_wins_over_pyproject_and_a_pyproject_without_the_table_is_passed(
    clean: Path,
) -> None:
    (clean / "kickside.toml").write_text('[worker]\nlease = "40s"\n')
    (clean / "sub").mkdir()
    (clean / "sub" / "pyproject.toml").write_text('[project]\nname = "sub"\n')
    (clean / "pyproject.toml").write_text('[tool.kickside.worker]\nlease = "50s"\n')
    os.chdir(clean / "sub")
    result = kickside("config")
    assert result.exit_code == 0, result.output
    assert f"configuration file: {clean / 'kickside.toml'} (found)" in result.stdout
    assert effective()["lease"]["value"] == 40.0


def test_config_and_kickside_config_name_the_file_which_must_exist(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean / "kickside.toml").write_text('[worker]\nlease = "40s"\n')
    (clean / "prod.toml").write_text('[worker]\nlease = "2m"\n')
    (clean / "env.toml").write_text('[worker]\nlease = "3m"\n')
    monkeypatch.setenv(CONFIG_ENV, "env.toml")
    assert effective()["lease"]["value"] == 180.0
    assert effective("--config", "prod.toml")["lease"]["value"] == 120.0
    result = kickside("config", "--json", "--config", "prod.toml")  # after the command too
    assert json.loads(result.stdout)["file"] == {"path": "prod.toml", "found_by": "--config"}
    for argv in (["--config", "missing.toml", "config"], ["jobs", "--config", "missing.toml"]):
        result = kickside(*argv)
        assert result.exit_code == 2, result.output
        assert one_error_line(result) == "error: configuration file missing.toml does not exist"
    monkeypatch.setenv(CONFIG_ENV, "gone.toml")
    result = kickside("config")
    assert result.exit_code == 2
    assert "configuration file gone.toml does not exist" in one_error_line(result)


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[worker]\nleese = "30s"\n', "unknown key worker.leese (did you mean worker.lease?)"),
        ('lease = "30s"\n', "unknown key lease (did you mean worker.lease?)"),
        ("colour = 1\n", "unknown key colour; known keys: database_url, read_only, schema"),
        ("worker = 5\n", "worker must be a table"),
        ("x = [\n", "is not valid TOML"),
    ],
)
def test_a_bad_file_is_one_line_naming_it_and_exit_2(
    clean: Path, content: str, message: str
) -> None:
    (clean / "kickside.toml").write_text(content)
    for argv in (["config"], ["jobs"], ["worker", "--app", "tests.support.pool_app"]):
        result = kickside(*argv)
        assert result.exit_code == 2, (argv, result.output)
        line = one_error_line(result)
        assert str(clean / "kickside.toml") in line and message in line, line


def test_an_unknown_key_in_pyproject_is_named_with_its_table(clean: Path) -> None:
    (clean / "pyproject.toml").write_text("[tool.kickside.worker]\nqueue = 'a:1'\n")
    result = kickside("config")
    assert result.exit_code == 2
    assert one_error_line(result) == (
        f"error: {clean / 'pyproject.toml'}: unknown key tool.kickside.worker.queue "
        "(did you mean tool.kickside.worker.queues?)"
    )


@pytest.mark.parametrize(
    ("flag", "key", "value"),
    [
        ("--lease", "lease", "soon"),
        ("--lease", "lease", "2s"),
        ("--queues", "queues", "default:0"),
        ("--queue-leases", "queue_leases", "reports"),
        ("--prefetch", "prefetch", "-1"),
        ("--shutdown-grace", "shutdown_grace", "later"),
        ("--log-level", "log_level", "loud"),
        ("--log-format", "log_format", "yaml"),
        ("--metrics-port", "metrics_port", "70000"),
        ("--prune-after", "prune_after", "0"),
        ("--app", "app", "not a module"),
    ],
)
def test_a_bad_value_in_the_file_gets_the_flags_message_naming_file_and_key(
    clean: Path, flag: str, key: str, value: str
) -> None:
    by_flag = kickside("config", flag, value)
    assert by_flag.exit_code == 2, by_flag.output
    (clean / "kickside.toml").write_text(f"[worker]\n{key} = {json.dumps(value)}\n")
    by_file = kickside("config")
    assert by_file.exit_code == 2, by_file.output
    where = f"{clean / 'kickside.toml'}:worker.{key}"
    assert one_error_line(by_file) == one_error_line(by_flag).replace(flag, where)


def test_a_value_of_the_wrong_type_names_file_and_key(clean: Path) -> None:
    (clean / "kickside.toml").write_text("[worker]\nlease = true\nprefetch = 'many'\n")
    result = kickside("config")
    assert result.exit_code == 2
    assert f"{clean / 'kickside.toml'}:worker.lease" in one_error_line(result)


# --- secrets ------------------------------------------------------------------------------------


def test_passwords_are_masked_in_kickside_config_and_in_every_message(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"postgresql+psycopg://app:{SECRET}@db.example/app?sslpassword={SECRET}"
    (clean / "kickside.toml").write_text(f'database_url = "{url}"\n')
    shown = kickside("config")
    assert shown.exit_code == 0 and SECRET not in shown.output
    assert "postgresql+psycopg://app:***@db.example/app" in shown.stdout
    document = kickside("config", "--json")
    assert SECRET not in document.output
    (entry,) = [o for o in json.loads(document.stdout)["options"] if o["name"] == "database_url"]
    assert entry["source"] == "file" and "***" in entry["value"]
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", url)
    assert SECRET not in kickside("config").output
    # A URL that cannot be used is named without its password, from the file or a flag.
    (clean / "kickside.toml").write_text(f'database_url = "postgresql://app:{SECRET}@db/"\n')
    monkeypatch.delenv("KICKSIDE_DATABASE_URL")
    for argv in (["config"], ["jobs"], ["config", "--database-url", f"mysql://a:{SECRET}@h/d"]):
        result = kickside(*argv)
        assert result.exit_code == 2, (argv, result.output)
        assert SECRET not in result.output and "database" in one_error_line(result)


def test_kickside_config_as_a_process_masks_the_password_and_opens_no_database(
    clean: Path,
) -> None:
    # An unreachable server: `kickside config` would hang or exit 5 if it connected.
    (clean / "kickside.toml").write_text(
        f'database_url = "postgresql+psycopg://app:{SECRET}@127.0.0.1:9/app"\n'
        '[worker]\nqueues = "default:2"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KICKSIDE_")}
    done = subprocess.run(
        [sys.executable, "-m", "kickside_tui.cli", "config"],
        cwd=clean,
        env={**env, "PYTHONPATH": str(ROOT), "KICKSIDE_QUEUES": "mail:1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()[2:]}
    assert "app:***@127.0.0.1:9/app" in lines["database_url"]
    assert lines["queues"].split()[1:] == ["mail:1", "env", "KICKSIDE_QUEUES"]


# --- the file drives the commands ---------------------------------------------------------------


def test_read_only_in_the_file_refuses_writes_before_the_database(clean: Path) -> None:
    (clean / "kickside.toml").write_text(
        'database_url = "postgresql+psycopg://u@127.0.0.1:9/none"\nread_only = true\n'
    )
    result = kickside("reload")
    assert result.exit_code == 2, result.output
    assert "read-only" in one_error_line(result)


def test_the_database_url_in_the_file_is_the_one_commands_open(clean: Path) -> None:
    (clean / "kickside.toml").write_text(f'database_url = "sqlite:///{clean / "jobs.db"}"\n')
    assert kickside("migrate").exit_code == 0
    assert (clean / "jobs.db").exists()
    result = kickside("nodes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"nodes": []}


@pytest.mark.slow
def test_the_worker_runs_with_the_files_queues_lease_and_node(clean: Path) -> None:
    db_file = clean / "jobs.db"
    (clean / "kickside.toml").write_text(
        f'database_url = "sqlite:///{db_file}"\n\n'
        "[worker]\n"
        'app = "tests.support.pool_app"\n'
        "queues = { alpha = 2, beta = 1 }\n"
        'lease = "45s"\n'
        'queue_leases = "beta=2m"\n'
        'node = "from-file"\n'
        "shutdown_grace = 5\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KICKSIDE_")}
    env.update(PYTHONPATH=str(ROOT), KICKSIDE_HOME=str(clean / "home"))
    cli = [sys.executable, "-m", "kickside_tui.cli"]
    migrated = subprocess.run([*cli, "migrate"], cwd=clean, env=env, capture_output=True)
    assert migrated.returncode == 0, migrated.stderr
    log = clean / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*cli, "worker"], cwd=clean, env=env, stdout=out, stderr=out, start_new_session=True
        )

    def published() -> Any:
        done = subprocess.run([*cli, "nodes", "--json"], cwd=clean, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr
        return [n for n in json.loads(done.stdout)["nodes"] if n["name"] == "from-file"]

    try:
        (node,) = wait_for(published, 60, "the node from the file")
        assert node["queues"] == {"alpha": 2, "beta": 1}
        (first,) = [x for x in log.read_text().splitlines() if "kickside worker" in x]
        assert "kickside worker from-file" in first and "queues=alpha:2,beta:1" in first
        assert "lease=45s,beta=120s" in first, first
    finally:
        code = stop(proc, signal.SIGTERM)
    assert code == 0, log.read_text()


# --- the SQLite synchronous mode ----------------------------------------------------------------


def test_config_shows_the_sqlite_synchronous_mode_and_where_it_came_from(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KICKSIDE_SQLITE_SYNCHRONOUS", raising=False)
    url = f"sqlite:///{clean / 'app.db'}"

    def synchronous(*argv: str) -> tuple[str, str, str]:
        entry = effective(*argv)["sqlite_synchronous"]
        assert (entry["flag"], entry["key"]) == (None, None)
        assert entry["env"] == "KICKSIDE_SQLITE_SYNCHRONOUS"
        return entry["value"], entry["source"], entry["origin"]

    assert synchronous() == ("normal", "default", "default")  # the embedded file
    assert synchronous("--database-url", url) == ("normal", "default", "default")
    assert synchronous("--database-url", url + "?synchronous=FULL") == (
        "full", "flag", "--database-url ?synchronous=",
    )  # fmt: skip
    monkeypatch.setenv("KICKSIDE_SQLITE_SYNCHRONOUS", "off")
    assert synchronous("--database-url", url) == ("off", "env", "KICKSIDE_SQLITE_SYNCHRONOUS")
    # The URL's parameter wins over the variable, wherever the URL came from.
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", url + "?synchronous=extra")
    assert synchronous() == ("extra", "env", "KICKSIDE_DATABASE_URL ?synchronous=")
    (clean / "kickside.toml").write_text(f'database_url = "{url}?synchronous=full"\n')
    monkeypatch.delenv("KICKSIDE_DATABASE_URL")
    assert synchronous()[:2] == ("full", "file")
    # The table shows it right after the URL.
    monkeypatch.setenv("COLUMNS", "400")
    result = kickside("config")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["database_url"])
    row = lines[at + 1].split()
    assert row[:2] == ["sqlite_synchronous", "full"]
    assert "kickside.toml:database_url" in lines[at + 1] and "?synchronous=" in lines[at + 1]


def test_config_shows_no_synchronous_mode_for_postgresql_and_refuses_a_bad_one(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KICKSIDE_SQLITE_SYNCHRONOUS", raising=False)
    assert "sqlite_synchronous" not in effective(
        "--database-url", "postgresql+psycopg://u@localhost/db"
    )
    monkeypatch.setenv("KICKSIDE_SQLITE_SYNCHRONOUS", "sometimes")
    result = kickside("config")
    assert result.exit_code == 2
    assert "invalid SQLite synchronous mode 'sometimes'" in one_error_line(result)
