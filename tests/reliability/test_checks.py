"""The fault suites' checkers catch what they are meant to catch (no database, no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support.execlog import overlapping, read_executions
from ..support.history import JobHistory, RunRow, history_problems


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
