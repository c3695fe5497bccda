"""The FastAPI example on both backends: a request enqueues in its own transaction, the
lifespan's pool runs the job, and a request that fails leaves neither its row nor its job.

The app is served as a server serves it: its lifespan entered on the test's event loop, requests
sent through httpx's ASGI transport on that same loop (Starlette's TestClient would run the app
on a loop of its own in another thread).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

import httpx
import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobState, wait_for
from kickside_engine.testing import refute_enqueued

from ..conftest import Target
from .support import EXAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

FOLDER = EXAMPLES / "asyncio"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def example(db: Database, target: Target, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``fastapi_app`` imported afresh on the test's migrated database, as the environment
    names it (the executors the pool spawns import ``fastapi_jobs`` from the same path)."""
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", target.url)
    if target.schema:
        monkeypatch.setenv("KICKSIDE_SCHEMA", target.schema)
    monkeypatch.syspath_prepend(str(FOLDER))
    for name in ("fastapi_app", "fastapi_jobs"):
        sys.modules.pop(name, None)
    try:
        yield importlib.import_module("fastapi_app")
    finally:
        for name in ("fastapi_app", "fastapi_jobs"):
            sys.modules.pop(name, None)


def _signups(db: Database) -> list[str]:
    table = sa.table("signups", sa.column("email"), schema=db.schema)
    with db.engine.connect() as conn:
        return list(conn.execute(sa.select(table.c.email)).scalars())


async def test_the_request_enqueues_and_the_lifespan_pool_runs_the_job(
    db: Database, example: ModuleType
) -> None:
    app = example.app
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            sent = await client.post("/signups", json={"email": "ada@example.com"})
            assert sent.status_code == 200, sent.text
            job_id = sent.json()["job_id"]
            # The pool in the app's lifespan runs it.
            done = await asyncio.to_thread(wait_for, db, job_id, timeout=60)
            assert (done.state, done.result) == (
                JobState.COMPLETED,
                {"sent_to": "ada@example.com"},
            )
            status = (await client.get(f"/jobs/{job_id}")).json()
            assert status == {"state": "completed", "result": {"sent_to": "ada@example.com"}}

            refused = await client.post("/signups", json={"email": "bob@example.invalid"})
            assert refused.status_code == 422
    # The failed request rolled back its own row and its job together.
    assert _signups(db) == ["ada@example.com"]
    refute_enqueued(db, worker="welcome_email", args={"email": "bob@example.invalid"})
