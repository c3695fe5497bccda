"""Typed args (issue 22): a worker's ``args_type`` is a dataclass, a pydantic v2 model, a msgspec
Struct or an ArgsAdapter; enqueue stores a typed instance's JSON encoding and the executor
decodes it back, in a real process pool as in a drain; args that do not decode discard the job
with a message naming the field; pydantic and msgspec are imported only by applications that
use them."""

from __future__ import annotations

import ast
import dataclasses
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from enum import IntEnum
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs
import pytest

from kickside_engine import (
    ArgsDecodeError,
    Database,
    InvalidArgumentError,
    Job,
    JobBuilder,
    JobState,
    RunOutcome,
    WorkerRegistry,
    enqueue,
    enqueue_fanout,
    enqueue_many,
    get_job,
)
from kickside_engine.control import list_runs
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.testing import assert_enqueued, drain_jobs, perform_job
from kickside_engine.typed_args import adapter_for
from kickside_engine.workers import spec_of

from ..support.processes import wait_for
from ..support.typed_app import (
    SEEN_ENV,
    Line,
    MsgspecLine,
    MsgspecOrder,
    Order,
    PydanticLine,
    PydanticOrder,
    PydanticOrderWorker,
    Status,
    msgspec_order,
    read_seen,
    registry,
    typed_order,
)

ORDER_ID = UUID("0190f3b2-7c1a-7d4e-9a55-3f0c2b8e1d42")
PLACED_AT = datetime(2024, 3, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))

ORDER = Order(
    order_id=ORDER_ID,
    placed_at=PLACED_AT,
    status=Status.PAID,
    lines=[Line("tea", 2, Decimal("3.30")), Line("mug", 1, Decimal("3.50"))],
    total=Decimal("10.10"),
    delivery_date=date(2024, 3, 4),
    channel="shop",
    tags=frozenset({"priority", "gift"}),
)
#: ORDER as stored: ISO 8601 with the offset kept, the UUID's string, exact decimal strings,
#: the enum's value, the optional's null, the set as a sorted list.
STORED = {
    "order_id": "0190f3b2-7c1a-7d4e-9a55-3f0c2b8e1d42",
    "placed_at": "2024-03-01T09:30:00+02:00",
    "status": "paid",
    "lines": [
        {"sku": "tea", "quantity": 2, "unit_price": "3.30"},
        {"sku": "mug", "quantity": 1, "unit_price": "3.50"},
    ],
    "total": "10.10",
    "note": None,
    "delivery_date": "2024-03-04",
    "channel": "shop",
    "tags": ["gift", "priority"],
}

#: What a worker decoding STORED gets, as its repr: a frozenset's repr follows the order its
#: elements went in (when their hashes collide), so it is built as the decoder builds it, from
#: the stored list, in this process (whose string hashes the in-process worker shares).
DECODED_REPR = repr(replace(ORDER, tags=frozenset(STORED["tags"])))

PYDANTIC_ORDER = PydanticOrder(
    order_id=ORDER_ID,
    placed_at=PLACED_AT,
    lines=[PydanticLine(sku="tea", quantity=2)],
    total=Decimal("6.60"),
)
MSGSPEC_ORDER = MsgspecOrder(
    order_id=ORDER_ID,
    placed_at=PLACED_AT,
    status=Status.REFUNDED,
    lines=[MsgspecLine("tea", 2)],
    total=Decimal("6.60"),
)


@pytest.fixture
def seen_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the typed workers record what they received (executors inherit the variable)."""
    path = tmp_path / "seen.jsonl"
    monkeypatch.setenv(SEEN_ENV, str(path))
    return path


def _final(db: Database, job_id: UUID) -> Job:
    job = get_job(db, job_id)
    assert job is not None
    return job


# --- through storage and execution -------------------------------------------------------


def test_a_nested_dataclass_round_trips_through_the_stored_json_to_its_worker(
    db: Database, seen_file: Path
) -> None:
    job_id = enqueue(db, typed_order.new(ORDER)).id  # type: ignore[attr-defined]
    assert _final(db, job_id).args == STORED
    assert_enqueued(db, worker=typed_order, args=ORDER)
    drain_jobs(db, registry)
    assert _final(db, job_id).state is JobState.COMPLETED
    assert read_seen(seen_file)[str(job_id)] == DECODED_REPR


def test_every_enqueue_path_stores_a_typed_instances_json_encoding(db: Database) -> None:
    template = JobBuilder("typed_order")
    ids = [
        enqueue(db, JobBuilder("typed_order", ORDER)).id,
        *(i.id for i in enqueue_many(db, [typed_order.new(ORDER)])),  # type: ignore[attr-defined]
        *(i.id for i in enqueue_fanout(db, template, [ORDER, MSGSPEC_ORDER])),
    ]
    assert [_final(db, i).args for i in ids[:3]] == [STORED] * 3
    assert _final(db, ids[3]).args["status"] == "refunded"


@pytest.mark.slow
def test_typed_args_reach_workers_in_a_real_process_pool(db: Database, seen_file: Path) -> None:
    order = replace(ORDER, tags=frozenset({"gift"}))  # one tag: its repr is the same anywhere
    pydantic_json = PYDANTIC_ORDER.model_dump(mode="json")
    bad_line = {"sku": "tea", "quantity": 0}
    jobs = {
        "dataclass": enqueue(db, typed_order.new(order)).id,  # type: ignore[attr-defined]
        "pydantic": enqueue(db, JobBuilder("pydantic_order", PYDANTIC_ORDER)).id,
        "msgspec": enqueue(db, msgspec_order.new(MSGSPEC_ORDER)).id,  # type: ignore[attr-defined]
        "plain": enqueue(db, JobBuilder("plain_dict", {"n": 1, "at": "not a date"})).id,
        "bad_pydantic": enqueue(
            db, JobBuilder("pydantic_order", {**pydantic_json, "lines": [bad_line]})
        ).id,
        "bad_dataclass": enqueue(db, JobBuilder("typed_order", {**STORED, "status": "lost"})).id,
    }
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 2}, mode="process", app="tests.support.typed_app", run_plugins=False
        ),
    )
    pool.start()
    try:
        wait_for(
            lambda: all(_final(db, i).state.is_final for i in jobs.values()),
            120,
            "every job final",
        )
    finally:
        pool.stop(30)
    states = {name: _final(db, i).state for name, i in jobs.items()}
    assert states == {
        "dataclass": JobState.COMPLETED,
        "pydantic": JobState.COMPLETED,
        "msgspec": JobState.COMPLETED,
        "plain": JobState.COMPLETED,
        "bad_pydantic": JobState.DISCARDED,
        "bad_dataclass": JobState.DISCARDED,
    }
    seen = read_seen(seen_file)
    assert seen[str(jobs["dataclass"])] == repr(order)
    # pydantic's parsed offset has a tzinfo class of its own: compare with its own decoding.
    stored = _final(db, jobs["pydantic"]).args
    assert stored == pydantic_json and stored["total"] == "6.60"
    assert seen[str(jobs["pydantic"])] == repr(PydanticOrder.model_validate(stored))
    assert seen[str(jobs["msgspec"])] == repr(MSGSPEC_ORDER)
    assert ast.literal_eval(seen[str(jobs["plain"])]) == {"n": 1, "at": "not a date"}
    for name, message in [
        (
            "bad_pydantic",
            "args don't decode for pydantic_order: PydanticOrder: $.lines[0].quantity: "
            "Input should be greater than 0",
        ),
        (
            "bad_dataclass",
            "args don't decode for typed_order: Order: $.status: 'lost' is not a valid Status",
        ),
    ]:
        job = _final(db, jobs[name])
        assert [e.error for e in job.errors] == [message]
        assert job.attempt == 1 < job.max_attempts  # discarded, not retried
        assert [r.outcome for r in list_runs(db, job.id)] == [RunOutcome.DISCARDED]
        assert str(job.id) not in seen


def test_a_pydantic_model_worker_decodes_its_args_or_discards_the_job_with_the_message(
    db: Database, seen_file: Path
) -> None:
    good = enqueue(db, spec_of(PydanticOrderWorker).new(PYDANTIC_ORDER)).id
    bad_args = {"order_id": "not-a-uuid", "placed_at": "2024-03-01T09:30:00+02:00", "lines": []}
    bad = enqueue(db, JobBuilder("pydantic_order", bad_args)).id
    drain_jobs(db, registry)
    stored = _final(db, good).args
    assert stored == {
        "order_id": str(ORDER_ID),
        "placed_at": "2024-03-01T09:30:00+02:00",
        "lines": [{"sku": "tea", "quantity": 2}],
        "total": "6.60",
    }
    assert _final(db, good).state is JobState.COMPLETED
    assert read_seen(seen_file)[str(good)] == repr(PydanticOrder.model_validate(stored))
    discarded = _final(db, bad)
    assert discarded.state is JobState.DISCARDED and discarded.attempt == 1
    (error,) = [e.error for e in discarded.errors]
    assert error.startswith("args don't decode for pydantic_order: PydanticOrder: $.order_id: ")
    assert "$.total: Field required" in error


def test_a_msgspec_struct_worker_round_trips_its_args(db: Database, seen_file: Path) -> None:
    job_id = enqueue(db, msgspec_order.new(MSGSPEC_ORDER)).id  # type: ignore[attr-defined]
    assert _final(db, job_id).args == {
        "order_id": str(ORDER_ID),
        "placed_at": "2024-03-01T09:30:00+02:00",
        "status": "refunded",
        "lines": [{"sku": "tea", "quantity": 2}],
        "total": "6.60",
        "note": None,
    }
    bad = enqueue(db, JobBuilder("msgspec_order", {**STORED, "lines": [{"sku": 1}]})).id
    drain_jobs(db, registry)
    assert read_seen(seen_file)[str(job_id)] == repr(MSGSPEC_ORDER)
    discarded = _final(db, bad)
    assert discarded.state is JobState.DISCARDED
    assert discarded.errors[0].error == (
        "args don't decode for msgspec_order: MsgspecOrder: $.lines[0].sku: "
        "Expected `str`, got `int`"
    )


def test_a_dataclass_decode_failure_discards_the_job_naming_each_bad_field(
    db: Database,
) -> None:
    bad = {
        **STORED,
        "placed_at": "last tuesday",
        "lines": [{"sku": "tea", "quantity": "2"}],
        "tags": "gift",
        "coupon": "SPRING",
    }
    del bad["total"]
    job_id = enqueue(db, JobBuilder("typed_order", bad)).id
    drain_jobs(db, registry, with_scheduled=True)
    job = _final(db, job_id)
    assert job.state is JobState.DISCARDED and job.attempt == 1
    assert [e.error for e in job.errors] == [
        "args don't decode for typed_order: Order: "
        "$.placed_at: expected an ISO 8601 datetime string, got str 'last tuesday'; "
        "$.lines[0].quantity: expected an integer, got str '2'; "
        "$.lines[0].unit_price: required field missing; "
        "$.total: required field missing; "
        "$.tags: expected an array, got str 'gift'; "
        "$: unknown field(s): coupon"
    ]


# --- encoding at enqueue ------------------------------------------------------------------


def test_a_dataclass_instance_is_encoded_when_the_job_is_built() -> None:
    assert JobBuilder("typed_order", ORDER).options.args == STORED
    assert typed_order.new(ORDER).options.args == STORED  # type: ignore[attr-defined]
    # Equal sets store equal JSON, whatever their iteration order: uniqueness by args holds.
    reordered = replace(ORDER, tags=frozenset(["gift", "priority"]))
    assert JobBuilder("typed_order", reordered).options.args["tags"] == ["gift", "priority"]


def test_an_instance_of_another_type_is_refused_by_a_typed_workers_builder() -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        typed_order.new(MSGSPEC_ORDER)  # type: ignore[attr-defined]
    assert str(refused.value) == (
        "worker 'typed_order' takes args of type Order (or a dict), got MsgspecOrder"
    )
    with pytest.raises(InvalidArgumentError, match=r"args must be a JSON object .* got object"):
        JobBuilder("plain_dict", object())


def test_a_plain_dict_worker_gets_its_args_exactly_as_given(db: Database, seen_file: Path) -> None:
    args = {"when": "2024-03-01T09:30:00+02:00", "amount": 10.1, "nested": {"ids": [1, 2]}}
    job_id = enqueue(db, JobBuilder("plain_dict", args)).id
    # A dict given to a typed worker is stored as given too, and decoded when it runs.
    typed_id = enqueue(db, typed_order.new(dict(STORED))).id  # type: ignore[attr-defined]
    assert _final(db, typed_id).args == STORED
    drain_jobs(db, registry)
    seen = read_seen(seen_file)
    assert ast.literal_eval(seen[str(job_id)]) == args and _final(db, job_id).args == args
    assert seen[str(typed_id)] == DECODED_REPR


def test_perform_job_encodes_and_decodes_as_a_pool_does(seen_file: Path) -> None:
    perform_job(typed_order, ORDER)
    perform_job(msgspec_order, MSGSPEC_ORDER)
    assert sorted(read_seen(seen_file).values()) == sorted([DECODED_REPR, repr(MSGSPEC_ORDER)])
    with pytest.raises(ArgsDecodeError, match=r"^Order: \$\.total: required field missing$"):
        perform_job(typed_order, {k: v for k, v in STORED.items() if k != "total"})


# --- declaring: what args_type accepts ----------------------------------------------------


@dataclass
class _HoldsASocket:
    connection: socket.socket


@dataclass
class _IntKeys:
    counts: dict[int, str]


@dataclass
class _Unresolved:
    later: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize(
    ("args_type", "message"),
    [
        (int, "args_type builtins.int is not supported: use a dataclass, an attrs class, "),
        (dict, "args_type builtins.dict is not supported"),
        (lambda data: data, "is not supported: use a dataclass"),
        (
            _HoldsASocket,
            "test_typed_args._HoldsASocket has a field JSON args cannot hold: "
            "<class 'socket.socket'>",
        ),
        (_IntKeys, "dict[int, str]: JSON object keys are strings"),
        (_Unresolved, "its annotations do not resolve (name 'NotDefinedAnywhere' is not defined)"),
    ],
)
def test_an_unsupported_args_type_is_refused_at_registration_in_one_line(
    args_type: Any, message: str
) -> None:
    local = WorkerRegistry()
    with pytest.raises(InvalidArgumentError) as refused:

        @local.worker("refused", args_type=args_type)
        def refused_worker(args: Any, job: Job) -> None: ...

    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert "refused" not in local


class Point:
    """An application type with an adapter of its own."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

    def __repr__(self) -> str:
        return f"Point({self.x}, {self.y})"


class PointArgs:
    """An ArgsAdapter: two methods, nothing to inherit."""

    def decode(self, data: dict[str, Any]) -> Point:
        return Point(int(data["xy"].split(",")[0]), int(data["xy"].split(",")[1]))

    def encode(self, value: Point) -> dict[str, Any]:
        return {"xy": f"{value.x},{value.y}"}


Point.__kickside_args__ = PointArgs()  # type: ignore[attr-defined]


def test_an_args_adapter_encodes_and_decodes_a_type_of_the_applications(db: Database) -> None:
    local = WorkerRegistry()
    got: list[Any] = []

    @local.worker("draw", args_type=Point)
    def draw(args: Point, job: Job) -> None:
        got.append(args)

    @local.worker("draw_again", args_type=PointArgs())  # the adapter object itself
    class DrawAgain:
        def perform(self, args: Point, job: Job) -> None:
            got.append(args)

    first = enqueue(db, JobBuilder("draw", Point(1, 2))).id  # by name: the type's adapter
    second = enqueue(db, spec_of(DrawAgain).new(Point(3, 4))).id
    assert [_final(db, i).args for i in (first, second)] == [{"xy": "1,2"}, {"xy": "3,4"}]
    drain_jobs(db, local)
    assert got == [Point(1, 2), Point(3, 4)]
    assert isinstance(adapter_for(Point), PointArgs)


class _Size(IntEnum):
    SMALL = 1


@dataclass
class _Strict:
    count: int = 0
    ratio: float = 0.0
    flag: bool = False
    size: _Size = _Size.SMALL
    at: time | None = None
    amount: Decimal | None = None
    names: list[str] = dataclasses.field(default_factory=list)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"count": 2, "ratio": 1, "size": 1}, _Strict(count=2, ratio=1.0)),
        ({"at": "09:30:00+02:00"}, _Strict(at=time(9, 30, tzinfo=timezone(timedelta(hours=2))))),
        ({"amount": "0.1", "names": ["a"]}, _Strict(amount=Decimal("0.1"), names=["a"])),
        ({"amount": 12}, _Strict(amount=Decimal(12))),
        ({"count": True}, "$.count: expected an integer, got bool True"),
        ({"count": 2.5}, "$.count: expected an integer, got float 2.5"),
        ({"ratio": "1.5"}, "$.ratio: expected a number, got str '1.5'"),
        ({"flag": "false"}, "$.flag: expected a boolean, got str 'false'"),
        ({"size": 3}, "$.size: 3 is not a valid _Size"),
        ({"amount": "ten"}, "$.amount: expected a decimal number as a string, got str 'ten'"),
        ({"names": "ab"}, "$.names: expected an array, got str 'ab'"),
        ({"names": ["a", 1]}, "$.names[1]: expected a string, got int 1"),
    ],
)
def test_dataclass_args_decode_strictly_as_json_is_exact(
    data: dict[str, Any], expected: _Strict | str
) -> None:
    adapter = adapter_for(_Strict)
    if isinstance(expected, _Strict):
        assert adapter.decode(data) == expected
    else:
        with pytest.raises(ArgsDecodeError) as refused:
            adapter.decode(data)
        assert str(refused.value) == f"_Strict: {expected}"


def test_an_aware_datetime_keeps_its_offset_and_a_naive_one_stays_naive() -> None:
    @dataclass
    class Times:
        aware: datetime
        naive: datetime

    # Annotations resolve from the module: a local class with module-level names is fine.
    adapter = adapter_for(Times)
    value = Times(datetime(2024, 1, 1, 12, tzinfo=UTC), datetime(2024, 1, 1, 12))
    encoded = adapter.encode(value)
    assert encoded == {"aware": "2024-01-01T12:00:00+00:00", "naive": "2024-01-01T12:00:00"}
    assert adapter.decode(encoded) == value
    assert adapter.decode(encoded).naive.tzinfo is None


@attrs.define
class _Tree:
    """An attrs class, recursive: decoded by the same converter as dataclasses."""

    name: str
    children: list[_Tree] = attrs.Factory(list)


def test_an_attrs_class_and_a_recursive_one_decode_like_dataclasses() -> None:
    adapter = adapter_for(_Tree)
    tree = _Tree("root", [_Tree("a"), _Tree("b", [_Tree("c")])])
    encoded = adapter.encode(tree)
    assert encoded["children"][1] == {"name": "b", "children": [{"name": "c", "children": []}]}
    assert adapter.decode(encoded) == tree
    with pytest.raises(ArgsDecodeError, match=r"\$\.children\[0\]\.name: expected a string"):
        adapter.decode({"name": "root", "children": [{"name": 1}]})


# --- optional libraries stay unloaded -----------------------------------------------------


def test_nothing_imports_pydantic_or_msgspec_unless_an_application_uses_them(
    tmp_path: Path,
) -> None:
    code = f"""
        import sys
        from dataclasses import dataclass
        from datetime import datetime, timezone
        from uuid import UUID, uuid4

        from kickside_engine import JobBuilder, WorkerRegistry, connect_database, enqueue, migrate
        from kickside_engine.testing import drain_jobs

        def loaded():
            return sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "msgspec"))

        registry = WorkerRegistry()

        @registry.worker("plain")
        def plain(args, job):
            pass

        db = connect_database("sqlite:///{tmp_path / "lazy.sqlite3"}")
        migrate.upgrade(db)
        enqueue(db, JobBuilder("plain", {{"n": 1}}))
        print(drain_jobs(db, registry).completed, "cattrs" in sys.modules)

        @dataclass
        class Ping:
            ping_id: UUID
            at: datetime

        seen = []

        @registry.worker("ping", args_type=Ping)
        def ping(args, job):
            seen.append(args)

        enqueue(db, ping.new(Ping(uuid4(), datetime.now(timezone.utc))))
        print(drain_jobs(db, registry).completed, type(seen[0]).__name__, loaded())
        db.dispose()
        """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["1 False", "1 Ping []"]
