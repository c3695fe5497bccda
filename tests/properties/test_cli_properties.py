"""Property-based tests of the `kickside` CLI: any command line ends cleanly.

Hypothesis builds command lines from the CLI's grammar with hostile values in every slot
(unicode with lone surrogates, as Python decodes undecodable bytes in argv; NUL; megabytes;
numbers out of range, NaN and infinities; malformed ids, cursors and JSON) and runs them in
process. Every run must exit with a documented code; a failure is one line on stderr starting
with ``error:`` (or Click's usage message, exit 2), never a traceback or a raw driver error;
``--json`` output is one JSON document; and the database stays consistent. A few command lines
also run as real processes, with bytes that are not UTF-8 in argv.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, enqueue, get_job
from kickside_engine.redact import redact_value
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support.processes import ROOT
from .support import (
    PROPERTY,
    any_float,
    any_int,
    any_text,
    assert_consistent,
    bad_json_text,
    job_id_text,
    storable_text,
)

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

runner = CliRunner()
EXIT_CODES = {0, 1, 2, 3, 4, 5}
# A Python exception's name at the start of the message: an error the CLI did not translate.
RAW_EXCEPTION = re.compile(r"^error: [A-Z][A-Za-z]*(Error|Exception|Warning)\b")


def run(target: Target, argv: list[str], *, options_after: bool = False) -> Result:
    """Run ``argv`` on the target's database, given before the command (or after it)."""
    if options_after:
        return runner.invoke(app, [*argv, *target.cli_args()])
    return runner.invoke(app, [*target.cli_args(), *argv])


def assert_clean(result: Result, argv: list[str]) -> None:
    """The run ended with a documented exit code and, on failure, one clear line."""
    shown = [a[:60] for a in argv]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{shown}: uncaught {result.exception!r}") from result.exception
    assert result.exit_code in EXIT_CODES, (shown, result.exit_code, result.stderr[-500:])
    assert "Traceback" not in result.stdout + result.stderr, shown
    if "--json" in argv:
        document = json.loads(result.stdout)  # exactly one document, whatever the outcome
        if result.exit_code not in (0, 1) or "error" in document:  # doctor's report exits 1
            error = document["error"]
            assert set(error) == {"code", "message", "exit_code", "details"}, (shown, error)
            assert error["exit_code"] == result.exit_code, (shown, error)
    if result.exit_code == 0:
        return
    err = result.stderr
    if "Usage:" in err:  # Click rejected the command line itself
        assert result.exit_code == 2, (shown, err[-500:])
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), (shown, err[-500:])
    assert not RAW_EXCEPTION.match(lines[0]), (shown, lines[0][:300])
    assert "[SQL:" not in lines[0], (shown, lines[0][:300])


cli_text = st.one_of(any_text.filter(lambda t: len(t) <= 100_000), storable_text)
numbers = st.one_of(any_int.map(str), any_float.map(repr), cli_text)
flags = st.sampled_from(
    ["--json", "--yes", "--dry-run", "--all", "--demand", "--slot", "--create", "--wide"]
)


def _options(names: list[str], values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    pairs = st.lists(st.tuples(st.sampled_from(names), values), max_size=4)
    return pairs.map(lambda ps: [part for pair in ps for part in pair])


FILTER = ["--state", "--queue", "--worker", "--tag", "--search"]
command_lines = st.one_of(
    st.tuples(
        st.just(["jobs"]),
        _options([*FILTER, "--kind", "--cursor"], cli_text),
        _options(["--limit"], numbers),
    ),
    st.tuples(
        st.sampled_from(
            [
                ["job"],
                ["explain"],
                ["wake"],
                ["park"],
                ["resume"],
                ["retry"],
                ["cancel"],
                ["discard"],
                ["delete"],
            ]
        ),
        job_id_text.map(lambda i: [i]),
        st.just(["--yes"]),
    ),
    st.tuples(
        st.sampled_from([["bulk", "retry"], ["bulk", "cancel"], ["bulk", "discard"]]),
        _options(FILTER, cli_text),
        _options(["--batch", "--sample"], numbers),
    ),
    st.tuples(
        st.just(["purge-slot", "--yes"]),
        _options(["--namespace", "--scope", "--key"], cli_text),
        _options(["--timeout"], numbers),
    ),
    st.tuples(
        st.just(["slots"]),
        _options(["--namespace", "--scope"], cli_text),
        _options(["--limit"], numbers),
    ),
    st.tuples(
        st.sampled_from([["queues", "pause"], ["queues", "resume"]]),
        cli_text.map(lambda q: [q]),
        st.just([]),
    ),
    st.tuples(
        st.just(["capacity", "set"]),
        cli_text.map(lambda n: [n]),
        _options(["--global-limit", "--per-key-limit", "--global-key", "--rate-limit"], numbers),
    ),
    st.tuples(
        st.just(["enqueue"]),
        cli_text.map(lambda w: [w]),
        _options(["--args", "--meta"], bad_json_text | cli_text),
    ),
    st.tuples(
        st.just(["enqueue", "ok"]),
        _options(
            [
                "--queue",
                "--tag",
                "--unique",
                "--namespace",
                "--scope",
                "--key",
                "--concurrency-key",
                "--schedule-at",
                "--app",
            ],
            cli_text,
        ),
        _options(
            ["--priority", "--max-attempts", "--schedule-in", "--unique-period", "--max-execution"],
            numbers,
        ),
    ),
    st.tuples(
        st.just(["audit"]),
        _options(["--action", "--target", "--cursor"], cli_text),
        _options(["--limit"], numbers),
    ),
    st.tuples(st.just(["prune", "--yes"]), st.just([]), _options(["--older-than-days"], numbers)),
    st.tuples(st.just(["cron"]), _options(["--app"], cli_text), st.just([])),
    st.tuples(
        st.sampled_from(
            [["queues"], ["capacity"], ["stats"], ["nodes"], ["leases"], ["migrate", "status"]]
        ),
        st.just([]),
        st.just([]),
    ),
).map(lambda parts: [*parts[0], *parts[1], *parts[2]])


@PROPERTY
@given(argv=command_lines, extra=st.lists(flags, max_size=2, unique=True), after=st.booleans())
def test_any_command_line_ends_cleanly(
    db: Database, target: Target, argv: list[str], extra: list[str], after: bool
) -> None:
    full = [*argv, *extra]
    result = run(target, full, options_after=after)
    event(f"{argv[0]} exit {result.exit_code}")
    assert_clean(result, full)
    assert_consistent(db)


@PROPERTY
@given(raw=job_id_text, verb=st.sampled_from(["job", "explain", "retry", "cancel", "wake"]))
def test_job_ids_are_usage_errors_or_not_found(
    db: Database, target: Target, raw: str, verb: str
) -> None:
    try:
        uuid.UUID(raw.strip())
        expected = 3
    except ValueError:
        # The last 8 to 12 hex digits of an id name a job as well (none here: exit 3).
        expected = 3 if re.fullmatch(r"[0-9a-fA-F]{8,12}", raw.strip()) else 2
    argv = [verb, "--yes", raw] if verb == "cancel" else [verb, raw]
    result = run(target, argv)
    assert_clean(result, argv)
    assert result.exit_code == expected, (raw, result.stderr)


@PROPERTY
@given(
    args=st.dictionaries(storable_text, storable_text | st.integers() | st.booleans(), max_size=4),
    tag=storable_text.filter(lambda t: bool(t) and len(t) <= 255),
)
def test_enqueued_args_come_back_redacted_and_whole(
    db: Database, target: Target, args: dict[str, Any], tag: str
) -> None:
    argv = ["enqueue", "ok", "--args", json.dumps(args), "--tag", tag, "--json"]
    result = run(target, argv)
    assert_clean(result, argv)
    assert result.exit_code == 0, result.stderr
    job_id = json.loads(result.stdout)["id"]
    shown = run(target, ["job", job_id, "--json"])
    assert shown.exit_code == 0, shown.stderr
    document = json.loads(shown.stdout)["job"]
    assert document["args"] == redact_value(args)
    stored = get_job(db, job_id)
    assert stored is not None and stored.args == args  # stored as given
    assert document["tags"] == [tag]
    assert_consistent(db)


def test_megabyte_arguments_are_refused_in_one_line(db: Database, target: Target) -> None:
    megabytes = "x" * 2_000_000
    cases = {
        ("enqueue", "ok", "--args", json.dumps({"blob": megabytes})): "exceed 1000000 bytes",
        ("enqueue", "ok", "--tag", megabytes): "longer than 255",
        ("jobs", "--search", megabytes): "longer than 1000",
        ("jobs", "--cursor", megabytes): "not a job listing cursor",
        ("job", megabytes): "is not a UUID",
        ("queues", "pause", megabytes): "invalid queue",
        ("purge-slot", "--namespace", megabytes, "--scope", "s", "--key", "k", "--yes"): "",
    }
    for argv, message in cases.items():
        result = run(target, list(argv))
        assert_clean(result, list(argv))
        assert message in result.stderr, (argv[:2], result.stderr[:300])
        assert len(result.stderr) < 1000, "an error quotes at most a short prefix of the value"
    assert_consistent(db)


def _kickside(target: Target, *argv: bytes | str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "kickside_tui.cli", *target.cli_args(), *argv],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_a_real_process_takes_undecodable_bytes_and_huge_arguments(
    db: Database, target: Target
) -> None:
    kept = enqueue(db, JobBuilder("ok", {"note": "caf\u00e9"})).id
    cases: list[tuple[list[bytes | str], int]] = [
        ([b"jobs", b"--search", b"\xff\xfe caf\xc3"], 2),  # not UTF-8: refused, named
        ([b"job", b"\xff" * 40], 2),
        ([b"queues", b"pause", b"q\xff"], 2),
        (["jobs", "--search", "%" * 100_000], 2),  # longer than a search may be
        (["enqueue", "ok", "--args", json.dumps({"blob": "x" * 100_000})], 0),
        (["enqueue", "ok", "--schedule-in", "nan"], 2),
        (["enqueue", "ok", "--max-attempts", "99999999999999999999999"], 2),
        (["jobs", "--limit", "-1"], 2),
        (["prune", "--older-than-days", "inf", "--yes"], 2),
        (["job", str(uuid.uuid4())], 3),
    ]
    for argv, code in cases:
        done = _kickside(target, *argv)
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == code, (argv[:2], err[-500:])
        assert "Traceback" not in err, (argv[:2], err[-2000:])
        if code:
            lines = [line for line in err.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("error: "), (argv[:2], err[-500:])
            assert not RAW_EXCEPTION.match(lines[0]), lines[0][:300]
    listed = json.loads(_kickside(target, "jobs", "--search", "café", "--json").stdout)
    assert [j["id"] for j in listed["jobs"]] == [str(kept)]
    assert_consistent(db)
