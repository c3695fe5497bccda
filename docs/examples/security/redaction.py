"""Redaction: args are stored and delivered as given, and redacted wherever they are shown;
errors are stored redacted."""

from __future__ import annotations

from typing import Any

from kickside_engine import Job, WorkerRegistry, connect_database, get_job, migrate
from kickside_engine.control import redact_args
from kickside_engine.testing import drain_jobs

# Names your application considers sensitive, beyond the built-in ones (password, token,
# api_key, secret, authorization, cookie, ...): for every worker, and for one worker.
registry = WorkerRegistry(sensitive_keys={"ssn"})
seen: list[dict[str, Any]] = []


@registry.worker("verify_identity", sensitive_keys={"date_of_birth"}, max_attempts=1)
def verify_identity(args: dict[str, Any], job: Job) -> None:
    seen.append(args)  # the worker gets the args exactly as enqueued
    raise ConnectionError(
        "GET https://svc:hunter2@kyc.example.com/check failed; api_key=sk_live_abc123"
    )


db = connect_database()
migrate.upgrade(db)
args = {"customer_ssn": "123-45-6789", "date_of_birth": "1990-01-01", "token_count": 3}
job_id = verify_identity.new(args).insert(db).id  # the declared names go into the job's meta
drain_jobs(db, registry)

job = get_job(db, job_id)
assert job is not None
assert job.args == args and seen == [args]  # stored and delivered whole
shown = redact_args(job.args, job.meta)  # what the CLI, the dashboard and the logs show
assert shown == {"customer_ssn": "[REDACTED]", "date_of_birth": "[REDACTED]", "token_count": 3}
error = job.errors[-1].error  # stored redacted: the host and the cause stay readable
assert "hunter2" not in error and "sk_live_abc123" not in error and "kyc.example.com" in error
print(shown)
print(error.splitlines()[0])
