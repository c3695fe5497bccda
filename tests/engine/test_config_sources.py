"""The engine's side of configuration: an embedding application builds a PoolConfig from the
environment and the configuration file, along the same path as `kickside worker`."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from kickside_engine import ConfigurationError, InvalidArgumentError
from kickside_engine.runtime import load_config, load_pool_config

from ..support.pool_app import registry


def test_load_pool_config_reads_the_environment_over_the_file_and_overrides_over_both(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kickside.worker]\nqueues = "a:2,b:1"\nlease = "1m"\nprefetch = 3\n'
        'queue_leases = { b = "5m" }\n'
    )
    config = load_pool_config(
        cwd=tmp_path, environ={"KICKSIDE_LEASE": "45s"}, registry=registry, mode="thread",
        prefetch=0,
    )  # fmt: skip
    assert config.queues == {"a": 2, "b": 1}
    assert config.lease == timedelta(seconds=45)
    assert config.queue_leases == {"b": timedelta(minutes=5)}
    assert (config.mode, config.registry, config.prefetch) == ("thread", registry, 0)
    assert config.prune_after == timedelta(days=7)


def test_load_config_names_where_each_value_came_from(tmp_path: Path) -> None:
    (tmp_path / "kickside.toml").write_text('schema = "jobs"\n')
    config = load_config(cwd=tmp_path, environ={}, names=["schema", "database_url"])
    assert config.options["schema"].origin == f"{tmp_path / 'kickside.toml'}:schema"
    assert config.value("database_url") is None  # the embedded default, resolved on connect
    assert set(config.options) == {"schema", "database_url"}


def test_bad_files_and_values_are_errors_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "kickside.toml").write_text("[worker]\nprefetch = -1\n")
    with pytest.raises(InvalidArgumentError, match=r"kickside.toml:worker.prefetch must be 0"):
        load_pool_config(cwd=tmp_path, environ={}, registry=registry, mode="thread")
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(environ={"KICKSIDE_CONFIG": str(tmp_path / "missing.toml")})


def test_executor_counts_slots_and_the_poll_interval_come_from_the_file_and_environment(
    tmp_path: Path,
) -> None:
    app, other = tmp_path / "app", tmp_path / "other"
    app.mkdir()
    other.mkdir()
    (app / "kickside.toml").write_text(
        '[worker]\nqueues = "io:200"\nasync_slots = 150\nprocess_executors = 0\n'
        'poll_interval = "2s"\n'
    )
    config = load_pool_config(
        cwd=app, environ={"KICKSIDE_ASYNC_EXECUTORS": "2"}, registry=registry, mode="thread"
    )
    assert (config.process_executors, config.async_executors) == (0, 2)
    assert (config.async_slots, config.slots_per_async_executor) == (150, 150)
    assert config.poll_interval == 2.0
    unset = load_pool_config(cwd=other, environ={}, registry=registry, mode="thread")
    assert (unset.process_executors, unset.async_executors, unset.async_slots) == (None,) * 3
    assert unset.poll_interval == 1.0
    for bad, shown in [("0", "0"), ("2h", "7200")]:
        message = f"poll interval must be from 0.05 to 3600 seconds, got {shown} "
        with pytest.raises(InvalidArgumentError, match=message):
            load_pool_config(
                cwd=app, environ={"KICKSIDE_POLL_INTERVAL": bad}, registry=registry,
                mode="thread",
            )  # fmt: skip
