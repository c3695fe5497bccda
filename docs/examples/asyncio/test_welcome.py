"""test_welcome.py: async tests of the welcome email, on Kickside's pytest fixtures (run here
under anyio's pytest plugin; pytest-asyncio serves as well)."""

from __future__ import annotations

import pytest
from fastapi_jobs import registry, welcome_email

from kickside_engine import AsyncDatabase, Done, JobState, get_job_async
from kickside_engine.async_testing import drain_jobs_async, perform_job_async

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_welcome_email_is_sent(kickside_async_db: AsyncDatabase) -> None:
    job = await welcome_email.new({"email": "ada@example.com"}).insert_async(kickside_async_db)
    drained = await drain_jobs_async(kickside_async_db, registry)
    assert drained.completed == 1
    sent = await get_job_async(kickside_async_db, job.id)
    assert sent is not None and sent.state is JobState.COMPLETED
    assert sent.result == {"sent_to": "ada@example.com"}


async def test_the_worker_alone() -> None:
    outcome = await perform_job_async(welcome_email, {"email": "bob@example.com"})
    assert outcome == Done(result={"sent_to": "bob@example.com"})
