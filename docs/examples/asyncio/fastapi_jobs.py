"""fastapi_jobs.py: the workers of the FastAPI example, imported by the pool's executors."""

from __future__ import annotations

import asyncio
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("welcome_email", queue="mailers")
async def welcome_email(args: dict[str, str], job: Job) -> dict[str, Any]:
    # Stands for `await smtp.send_message(...)` with an async mail client.
    await asyncio.sleep(0.01)
    return {"sent_to": args["email"]}
