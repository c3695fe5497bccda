"""Every example the pages include runs, as a reader runs it: ``python example.py`` in a fresh
folder, on the embedded SQLite database (``KICKSIDE_HOME``), with its folder importable."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from .support import EXAMPLES, PAGES, SNIPPET, example_env, run

#: Scripts the pages show, run here one by one.
SCRIPTS = [
    "workers/outcomes.py",
    "workers/results.py",
    "workers/progress.py",
    "workers/retries.py",
    "workers/uniqueness.py",
    "workers/typed_args.py",
    "workers/transactions.py",
    "workers/timeouts.py",
    "workers/async_workers.py",
    "hooks/run_hooks.py",
    "hooks/run_traced.py",
    "slots/mailboxes.py",
    "capacity/exports.py",
    "capacity/rates.py",
    "workflows/import_pipeline.py",
    "workflows/batch_callback.py",
    "cron/run_cron.py",
    "pool/embedded.py",
    "security/redaction.py",
    "porting/from_celery.py",
]
#: Example files that scripts import, that another test runs, or that are not Python.
ELSEWHERE = {
    "workers/slow_tasks.py": "imported by workers/timeouts.py",
    "workers/io_tasks.py": "imported by workers/async_workers.py",
    "hooks/tracing.py": "imported by hooks/run_hooks.py",
    "hooks/traced.py": "imported by hooks/run_traced.py",
    "cron/scheduled.py": "imported by cron/run_cron.py",
    "pool/app_jobs.py": "imported by pool/embedded.py",
    "testing/signup.py": "imported by testing/test_signup.py",
    "testing/test_signup.py": "run by test_the_testing_example_passes_under_pytest",
    "quickstart/tasks.py": "test_getting_started.py",
    "quickstart/enqueue.py": "test_getting_started.py",
    "billing/billing.py": "test_getting_started.py",
    "billing/enroll.py": "test_getting_started.py",
    "billing/wake.py": "test_getting_started.py",
    "asyncio/fastapi_app.py": "run by test_fastapi_example.py",
    "asyncio/fastapi_jobs.py": "imported by asyncio/fastapi_app.py",
    "asyncio/test_welcome.py": "run by test_the_async_testing_example_passes_under_pytest",
    "deploy/kickside-worker.service": "test_pages.py checks its commands",
    "deploy/kubernetes.yaml": "test_pages.py checks its commands",
}


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_example_runs(script: str, tmp_path: Path) -> None:
    path = EXAMPLES / script
    run([sys.executable, str(path)], tmp_path, example_env(tmp_path, path.parent))


def test_the_testing_example_passes_under_pytest(tmp_path: Path) -> None:
    for name in ("signup.py", "test_signup.py"):
        shutil.copy(EXAMPLES / "testing" / name, tmp_path / name)
    out = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "error",
            "test_signup.py",
        ],
        tmp_path,
        example_env(tmp_path, tmp_path),
    )
    assert "4 passed" in out, out


def test_the_async_testing_example_passes_under_pytest(tmp_path: Path) -> None:
    for name in ("fastapi_jobs.py", "test_welcome.py"):
        shutil.copy(EXAMPLES / "asyncio" / name, tmp_path / name)
    pytest_args = ["-q", "-p", "no:cacheprovider", "-W", "error", "test_welcome.py"]
    out = run(
        [sys.executable, "-m", "pytest", *pytest_args],
        tmp_path,
        example_env(tmp_path, tmp_path),
    )
    assert "2 passed" in out, out


def test_every_example_is_run_and_shown() -> None:
    files = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*") if p.is_file()}
    files = {f for f in files if "__pycache__" not in f}
    assert files == set(SCRIPTS) | set(ELSEWHERE), "classify every file of docs/examples"
    included = {m for page in PAGES for m in SNIPPET.findall(page.read_text())}
    assert files <= included, f"examples no page shows: {sorted(files - included)}"
    assert included <= files, f"pages include missing examples: {sorted(included - files)}"
