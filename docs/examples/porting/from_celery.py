"""A Celery task ported to Kickside, piece by piece (docs/guides/porting.md).

The Celery original::

    @app.task(bind=True, max_retries=5)
    def send_invoice(self, invoice_id, email):
        try:
            receipt = billing.send(invoice_id, email)
        except billing.RateLimited as exc:
            raise self.retry(exc=exc, countdown=exc.retry_after)
        return {"receipt": receipt}

    send_invoice.apply_async((42, "ada@example.com"), countdown=60)
    print(send_invoice.delay(43, "bob@example.com").get(timeout=10))
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from kickside_engine import (
    Job,
    JobState,
    RetryAfter,
    WorkerRegistry,
    connect_database,
    migrate,
    wait_for,
)
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()


@dataclass
class InvoiceArgs:  # Celery's positional args become one typed, stored document
    invoice_id: int
    email: str


class RateLimited(Exception):
    retry_after = 30.0


def send(invoice_id: int, email: str, attempt: int) -> str:
    """The billing provider: says "slow down" once, then accepts."""
    if attempt == 1:
        raise RateLimited(f"429 for invoice {invoice_id}")
    return f"rcpt-{invoice_id}"


# max_retries=5 counts retries; max_attempts counts runs, the first one included.
@registry.worker("send_invoice", queue="billing", max_attempts=6, args_type=InvoiceArgs)
def send_invoice(args: InvoiceArgs, job: Job) -> dict[str, str]:
    try:
        receipt = send(args.invoice_id, args.email, job.attempt)
    except RateLimited as exc:
        # self.retry(countdown=...): fail this attempt, retry no sooner than the provider says.
        raise RetryAfter(str(exc), after=timedelta(seconds=exc.retry_after)) from exc
    return {"receipt": receipt}  # the return value is the job's result, as in Celery


db = connect_database()
migrate.upgrade(db)
# apply_async(countdown=60) / delay(): a builder, inserted when the caller says (in its own
# transaction with conn=..., so a rolled-back request leaves no job).
later = send_invoice.new(InvoiceArgs(42, "ada@example.com")).schedule_in(timedelta(seconds=60))
later.insert(db)
now = send_invoice.new(InvoiceArgs(43, "bob@example.com")).insert(db)

# A pool (kickside worker --app ... --queues billing:10) runs them; here, this thread does,
# with scheduled and retrying jobs run at once.
drain_jobs(db, registry, with_scheduled=True)

done = wait_for(db, now.id, timeout=10)  # AsyncResult.get(timeout=10)
assert done.state is JobState.COMPLETED and done.result == {"receipt": "rcpt-43"}
assert done.error is not None and done.error.startswith("RetryAfter: 429")  # the first attempt
print(done.result)
