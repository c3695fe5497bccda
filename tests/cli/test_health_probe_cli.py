"""The readiness probe of the Deploying guide: `kickside nodes --host H --check` exits 0 once a
pool on that host heartbeats, 1 (one line on stderr) when none does."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from typer.testing import CliRunner

from kickside_engine import Database
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support.processes import start_worker, stop, wait_for

runner = CliRunner()


def _probe(target: Target, host: str) -> tuple[int, str]:
    result = runner.invoke(app, [*target.cli_args(), "nodes", "--host", host, "--check", "--json"])
    return result.exit_code, result.stderr


def test_the_probe_fails_before_a_pool_starts_and_passes_while_it_runs(
    db: Database, target: Target, tmp_path: Path
) -> None:
    host = socket.gethostname()
    code, stderr = _probe(target, host)
    assert code == 1 and stderr.strip() == f"error: no node on host {host!r} has a fresh heartbeat"
    proc = start_worker(target.cli_args(), log=tmp_path / "pool.out")
    try:
        wait_for(lambda: _probe(target, host)[0] == 0, 60, "the probe to pass")
        listed = runner.invoke(app, [*target.cli_args(), "nodes", "--host", host, "--json"])
        [node] = json.loads(listed.stdout)["nodes"]
        assert node["host"] == host and node["pid"] == proc.pid
        assert _probe(target, "another-host")[0] == 1  # only this host's pools count
    finally:
        assert stop(proc) == 0
    # A pool that stopped deregistered: the probe fails again.
    assert _probe(target, host)[0] == 1


def test_the_probe_without_a_host_checks_any_node(target: Target, db: Database) -> None:
    result = runner.invoke(app, [*target.cli_args(), "nodes", "--check"])
    assert result.exit_code == 1 and "no node has a fresh heartbeat" in result.stderr
