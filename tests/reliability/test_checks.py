"""The fault suites' checkers catch what they are meant to catch (no database, no processes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ..support.execlog import overlapping, read_executions
from ..support.history import JobHistory, RunRow, history_problems, overlapping_runs

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _log(path: Path, *lines: str) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_overlapping_executions_are_reported(tmp_path: Path) -> None:
    log = _log(
        tmp_path / "x.log",
        "S 11 10 job-a 1 100",
        "E 11 10 job-a 1 200",
        "S 21 20 job-a 2 150",
        "E 21 20 job-a 2 300",  # starts before attempt 1 ended
        "S 11 10 job-b 1 100",
        "E 11 10 job-b 1 200",
        "S 21 20 job-b 2 250",
        "E 21 20 job-b 2 300",
    )
    problems = overlapping(read_executions(log), {})
    assert len(problems) == 1 and problems[0].startswith("job job-a: attempt 2")


def test_an_unended_execution_runs_until_its_pool_was_killed(tmp_path: Path) -> None:
    log = _log(tmp_path / "x.log", "S 11 10 job-a 1 100", "S 21 20 job-a 2 150")
    assert overlapping(read_executions(log), {10: 120, 20: 400}) == []
    late = overlapping(read_executions(log), {10: 180, 20: 400})  # killed after 2 started
    assert len(late) == 1
    assert "never ended" in overlapping(read_executions(log), {})[0]


def test_one_attempt_started_twice_is_an_error(tmp_path: Path) -> None:
    log = _log(tmp_path / "x.log", "S 11 10 job-a 1 100", "S 21 20 job-a 1 150")
    with pytest.raises(AssertionError, match="started twice"):
        read_executions(log)


@pytest.mark.parametrize(
    ("runs", "attempt", "problem"),
    [
        ([("completed",)], 1, None),
        ([("rescued",), ("completed",)], 2, None),
        ([("completed",), ("completed",)], 2, "outcomes"),  # recorded twice
        ([("error",), ("completed",)], 2, "neither rescued nor crashed"),
        ([("completed",)], 2, "run attempts"),  # an attempt without its run row
        ([("rescued",), (None,)], 2, "outcomes"),
    ],
)
def test_history_problems(runs: list[tuple[str | None]], attempt: int, problem: str | None) -> None:
    job = JobHistory("job-a", "completed", attempt, None)
    job.runs = [
        RunRow(i + 1, "n", outcome, outcome is not None) for i, (outcome,) in enumerate(runs)
    ]
    found = history_problems({"job-a": job})
    if problem is None:
        assert found == []
    else:
        assert found and any(problem in p for p in found), found


def _span(attempt: int, start_ms: int, end_ms: int | None, node: str = "n") -> RunRow:
    end = T0 + timedelta(milliseconds=end_ms) if end_ms is not None else None
    outcome = None if end is None else "completed"
    return RunRow(
        attempt, node, outcome, end is not None, T0 + timedelta(milliseconds=start_ms), end
    )


@pytest.mark.parametrize(
    ("spans", "problem"),
    [
        ([(1, 0, 100), (2, 100, 200)], None),  # back to back: the rescue instant, then a claim
        ([(1, 0, 100), (2, 250, None)], None),  # the last run may still be open
        ([(1, 0, 100), (2, 60, 200)], "started 40.0 ms before attempt 1"),
        ([(2, 60, 200), (1, 0, 100)], "started 40.0 ms before attempt 1"),  # in start order
        ([(1, 0, None), (2, 250, 300)], "was still open"),
        ([(1, 0, 100), (2, 150, 400), (3, 300, 500)], "attempt 3 on n started 100.0 ms"),
    ],
)
def test_overlapping_runs_in_the_run_history(
    spans: list[tuple[int, int, int | None]], problem: str | None
) -> None:
    job = JobHistory("job-a", "completed", len(spans), None)
    job.runs = [_span(*s) for s in spans]
    found = overlapping_runs({"job-a": job})
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found
