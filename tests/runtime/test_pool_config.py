"""`PoolConfig` and `kickside worker --queues` refuse the same bad queues with the same words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kickside_engine import ConfigurationError, InvalidArgumentError
from kickside_engine.runtime import PoolConfig, parse_queues
from kickside_tui.cli.main import app

from ..support.workers import registry

BAD_QUEUES: list[tuple[dict[Any, Any], str, str]] = [
    ({"default": 0}, "default:0", "concurrency of queue 'default' must be 1..1000, got 0"),
    ({"default": -3}, "default:-3", "concurrency of queue 'default' must be 1..1000, got -3"),
    ({"default": 1001}, "default:1001", "must be 1..1000, got 1001"),
    ({"bad queue!": 1}, "bad queue!:1", "invalid queue 'bad queue!'"),
    ({}, ",", "no queues"),
]


@pytest.mark.parametrize(("queues", "spec", "message"), BAD_QUEUES)
def test_pool_config_and_the_cli_refuse_the_same_queues(
    queues: dict[Any, Any], spec: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidArgumentError) as api:
        PoolConfig(queues=queues, registry=registry, mode="thread")
    assert message in str(api.value)
    result = CliRunner().invoke(
        app,
        [
            "--database-url",
            f"sqlite:///{tmp_path}/k.sqlite3",
            "worker",
            "--app",
            "x",
            "--queues",
            spec,
        ],
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("concurrency", [1.5, "3", True, None])
def test_a_concurrency_that_is_not_an_integer_is_refused(concurrency: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="concurrency of queue 'default'"):
        PoolConfig(queues={"default": concurrency}, registry=registry, mode="thread")


def test_good_queues_pass_unchanged() -> None:
    assert PoolConfig(queues={"default": 1, "mailers": 1000}, registry=registry, mode="thread")
    assert parse_queues("default:10, mailers:5,bulk") == {"default": 10, "mailers": 5, "bulk": 10}


@pytest.mark.parametrize(
    ("platform", "methods", "why"),
    [
        ("emscripten", ["spawn"], "emscripten cannot start processes"),
        ("linux", ["fork"], "multiprocessing has no 'spawn' start method on this platform"),
    ],
)
def test_process_executors_say_where_they_are_unsupported(
    monkeypatch: pytest.MonkeyPatch, platform: str, methods: list[str], why: str
) -> None:
    """Where processes cannot be started, the pool says so before it starts, and what to use;
    threads still work there."""
    monkeypatch.setattr("sys.platform", platform)
    monkeypatch.setattr("multiprocessing.get_all_start_methods", lambda: methods)
    with pytest.raises(ConfigurationError) as refused:
        PoolConfig(queues={"default": 1}, app="tests.support.workers")
    assert str(refused.value) == (
        f"process executors are not supported here: {why}; run jobs on threads of this "
        "process instead (PoolConfig(mode='thread'), kickside worker --in-process)"
    )
    assert PoolConfig(queues={"default": 1}, mode="thread", registry=registry).mode == "thread"
