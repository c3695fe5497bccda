"""fastapi_app.py: enqueue in the request's own transaction; run the jobs in the lifespan's pool.

Serve it with ``uvicorn fastapi_app:app`` after ``kickside migrate`` (``KICKSIDE_DATABASE_URL``
names the database; without it, the embedded SQLite file).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi_jobs import welcome_email
from pydantic import BaseModel
from sqlalchemy import Column, Integer, MetaData, String, Table, insert

from kickside_engine import AsyncWorkerPool, connect_async_database, get_job_async
from kickside_engine.runtime import PoolConfig

adb = connect_async_database()  # no connection yet: that waits for the first request

# The application's own table, beside Kickside's.
metadata = MetaData(schema=adb.schema)
signups = Table(
    "signups",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("email", String(255), nullable=False),
)


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with adb.begin() as conn:
        await conn.run_sync(metadata.create_all)
    # The pool runs beside the event loop; its executors are processes that import
    # fastapi_jobs: here one async executor (an event loop running up to 100 jobs at once)
    # and no process executors, as every worker is `async def`.
    config = PoolConfig(
        app="fastapi_jobs", queues={"mailers": 100}, process_executors=0, async_executors=1
    )
    async with AsyncWorkerPool(adb, config):  # leaving it stops the pool gracefully
        yield
    await adb.dispose()


app = FastAPI(lifespan=lifespan)


class Signup(BaseModel):
    email: str


@app.post("/signups")
async def sign_up(signup: Signup) -> dict[str, str]:
    # One transaction: the signup and its welcome email commit together, or neither does.
    async with adb.begin() as conn:
        await conn.execute(insert(signups).values(email=signup.email))
        job = await welcome_email.new({"email": signup.email}).insert_async(adb, conn=conn)
        if signup.email.endswith(".invalid"):
            raise HTTPException(422, "undeliverable address")  # rolls both back
    return {"job_id": str(job.id)}


@app.get("/jobs/{job_id}")
async def job_status(job_id: str) -> dict[str, Any]:
    job = await get_job_async(adb, job_id)
    if job is None:
        raise HTTPException(404, "no such job")
    return {"state": job.state.value, "result": job.result}
