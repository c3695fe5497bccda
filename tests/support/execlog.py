"""Reading the execution records of :mod:`tests.support.chaos_app` and checking them.

An execution is one start record, with its end record when the body finished. An execution
whose pool was killed may have no end: it ended (at the latest) when the kill landed, which the
test knows as a ``CLOCK_MONOTONIC`` time per supervisor PID.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Execution:
    """One run of a job's body in an executor."""

    job_id: str
    attempt: int
    pid: int
    ppid: int
    start_ns: int
    end_ns: int | None = None


def read_executions(path: Path) -> dict[str, list[Execution]]:
    """Executions per job id, in attempt order; a second start of one attempt is an error."""
    found: dict[tuple[str, int], Execution] = {}
    if not path.exists():
        return {}
    for line in path.read_text().splitlines():
        mark, pid, ppid, job_id, attempt, at = line.split()
        key = (job_id, int(attempt))
        if mark == "S":
            assert key not in found, f"attempt {attempt} of job {job_id} started twice"
            found[key] = Execution(job_id, int(attempt), int(pid), int(ppid), int(at))
        else:
            execution = found[key]
            assert execution.pid == int(pid) and execution.end_ns is None, line
            execution.end_ns = int(at)
    by_job: dict[str, list[Execution]] = defaultdict(list)
    for execution in sorted(found.values(), key=lambda e: (e.job_id, e.attempt)):
        by_job[execution.job_id].append(execution)
    return dict(by_job)


def overlapping(executions: dict[str, list[Execution]], killed_at_ns: dict[int, int]) -> list[str]:
    """Descriptions of every pair of executions of one job that overlap in time.

    An execution without an end record counts as running until its supervisor (``ppid``) was
    killed; one that has neither an end nor a killed supervisor is reported too.
    """
    problems: list[str] = []
    for job_id, runs in executions.items():
        spans: list[tuple[int, int, Execution]] = []
        for run in runs:
            end = run.end_ns if run.end_ns is not None else killed_at_ns.get(run.ppid)
            if end is None:
                problems.append(f"job {job_id} attempt {run.attempt} never ended, and no kill")
                continue
            spans.append((run.start_ns, end, run))
        spans.sort(key=lambda s: s[0])
        for (_s1, e1, a), (s2, _e2, b) in itertools.pairwise(spans):
            if s2 < e1:
                problems.append(
                    f"job {job_id}: attempt {b.attempt} (pid {b.pid}) started "
                    f"{(e1 - s2) / 1e6:.1f} ms before attempt {a.attempt} (pid {a.pid}) ended"
                )
    return problems
