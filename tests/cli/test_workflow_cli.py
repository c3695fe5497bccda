"""`kickside workflow show|cancel|retry ID`: the tree of steps with their states, and acting on a
workflow as a whole (previewed, confirmed, audited); `kickside explain` on a waiting job."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, JobState, Workflow, get_workflow
from kickside_engine.control import list_audit
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def cli_json(target: Target, *args: str) -> Any:
    result = cli(target, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _insert(db: Database) -> dict[str, Any]:
    wf = Workflow("import-42")
    wf.add("fetch", JobBuilder("fetch", {"url": "https://u:hunter2@example.com/x"}))
    wf.add("parse", JobBuilder("parse", {}), after=["fetch"])
    wf.add_many("thumb", [JobBuilder("thumb", {"i": i}) for i in range(3)], after=["parse"])
    wf.add("notify", JobBuilder("notify", {}), after=["thumb"])
    return wf.insert(db).jobs


def test_show_prints_the_tree_with_each_steps_state(db: Database, target: Target) -> None:
    _insert(db)
    result = cli(target, "workflow", "show", "import-42")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "workflow import-42: pending (1 available, 5 waiting)"
    assert "fetch available" in lines[1]
    assert "parse waiting (waiting on 1 of 1)" in lines[2]
    assert "thumb (3 jobs): 3 waiting" in lines[3]
    assert "notify waiting (waiting on 3 of 3)" in lines[4]
    unfolded = cli(target, "workflow", "show", "import-42", "--steps").stdout
    assert all(f"thumb[{i}] waiting" in unfolded for i in range(3))


def test_show_json_lists_every_step(db: Database, target: Target) -> None:
    jobs = _insert(db)
    doc = cli_json(target, "workflow", "show", "import-42")
    assert doc["state"] == "pending" and doc["counts"] == {"available": 1, "waiting": 5}
    by_step = {s["step"]: s for s in doc["steps"]}
    assert by_step["notify"]["after"] == sorted(str(jobs[f"thumb[{i}]"]) for i in range(3))
    assert by_step["notify"]["upstreams_pending"] == 3 and by_step["thumb[1]"]["group"] == "thumb"


def test_an_unknown_workflow_is_one_line_and_exit_3(db: Database, target: Target) -> None:
    result = cli(target, "workflow", "show", "nope")
    assert result.exit_code == 3
    assert result.stderr.strip() == "error: workflow nope not found"


def test_cancel_asks_then_cancels_the_open_jobs_and_audits_once(
    db: Database, target: Target
) -> None:
    _insert(db)
    refused = cli(target, "workflow", "cancel", "import-42")
    assert refused.exit_code == 2 and "Cancel 6 jobs of workflow import-42" in refused.stderr
    assert get_workflow(db, "import-42").counts == {JobState.AVAILABLE: 1, JobState.WAITING: 5}
    done = cli(target, "workflow", "cancel", "import-42", "--yes")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[0] == (
        "cancelled 6 jobs of workflow import-42 (5 of them by cascade from their upstreams)"
    )
    assert get_workflow(db, "import-42").counts == {JobState.CANCELLED: 6}
    [entry] = [e for e in list_audit(db).entries if e.action == "cancel_workflow"]
    assert entry.target == "import-42"
    again = cli(target, "workflow", "cancel", "import-42", "--yes")
    assert again.exit_code == 0 and "nothing to cancel" in again.stderr


def test_retry_runs_the_failed_jobs_again_and_read_only_refuses(
    db: Database, target: Target
) -> None:
    _insert(db)
    assert cli(target, "workflow", "cancel", "import-42", "--yes").exit_code == 0
    refused = cli(target, "--read-only", "workflow", "retry", "import-42", "--yes")
    assert refused.exit_code == 2 and "read-only" in refused.stderr
    doc = cli_json(target, "workflow", "retry", "import-42", "--yes")
    assert len(doc["changed"]) == 6
    assert doc["workflow"]["counts"] == {"available": 1, "waiting": 5}


def test_explain_says_how_many_upstreams_a_waiting_job_waits_on(
    db: Database, target: Target
) -> None:
    jobs = _insert(db)
    result = cli(target, "explain", str(jobs["notify"]))
    assert result.exit_code == 0, result.output
    assert "waiting on 3 of 3 upstream jobs: thumb[0] (waiting), thumb[1] (waiting)" in (
        result.stdout
    )
