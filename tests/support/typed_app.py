"""Workers with typed args, for the typed-args tests; a process pool's executors import it.

Each worker appends one JSON line ``{"worker", "job_id", "args"}`` to the file named by
``KICKSIDE_TYPED_SEEN`` (executors are other processes), where ``args`` is the ``repr`` of what
``perform`` received: a repr shows each value's type (``UUID('...')``, ``Decimal('10.10')``,
``<Status.PAID: 'paid'>``), so comparing it with the repr of the enqueued value checks types
and values at once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

import msgspec
from pydantic import BaseModel, Field

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()
SEEN_ENV = "KICKSIDE_TYPED_SEEN"


class Status(Enum):
    PAID = "paid"
    REFUNDED = "refunded"


@dataclass(frozen=True)
class Line:
    sku: str
    quantity: int
    unit_price: Decimal


@dataclass(frozen=True)
class Order:
    order_id: UUID
    placed_at: datetime
    status: Status
    lines: list[Line]
    total: Decimal
    note: str | None = None
    delivery_date: date | None = None
    channel: Literal["web", "shop"] = "web"
    tags: frozenset[str] = field(default_factory=frozenset)


class PydanticLine(BaseModel):
    sku: str
    quantity: int = Field(gt=0)


class PydanticOrder(BaseModel):
    order_id: UUID
    placed_at: datetime
    lines: list[PydanticLine]
    total: Decimal


class MsgspecLine(msgspec.Struct, frozen=True):
    sku: str
    quantity: int


class MsgspecOrder(msgspec.Struct, frozen=True):
    order_id: UUID
    placed_at: datetime
    status: Status
    lines: list[MsgspecLine]
    total: Decimal
    note: str | None = None


def seen(worker: str, job: Job, args: Any) -> None:
    """Record what ``perform`` received, where the test reads it."""
    path = os.environ.get(SEEN_ENV)
    if path:
        line = {"worker": worker, "job_id": str(job.id), "args": repr(args)}
        with open(path, "a") as fh:
            fh.write(json.dumps(line) + "\n")


def read_seen(path: Path) -> dict[str, str]:
    """What each job's worker received (its repr), by job id."""
    if not path.exists():
        return {}
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {line["job_id"]: line["args"] for line in lines}


@registry.worker("typed_order", args_type=Order, max_attempts=5)
def typed_order(args: Order, job: Job) -> None:
    assert isinstance(args, Order)
    seen("typed_order", job, args)


@registry.worker("pydantic_order", max_attempts=5)
class PydanticOrderWorker:
    args_type = PydanticOrder

    def perform(self, args: PydanticOrder, job: Job) -> None:
        assert isinstance(args, PydanticOrder)
        seen("pydantic_order", job, args)


@registry.worker("msgspec_order", args_type=MsgspecOrder, max_attempts=5)
def msgspec_order(args: MsgspecOrder, job: Job) -> None:
    assert isinstance(args, MsgspecOrder)
    seen("msgspec_order", job, args)


@registry.worker("plain_dict")
def plain_dict(args: dict[str, Any], job: Job) -> None:
    seen("plain_dict", job, args)
