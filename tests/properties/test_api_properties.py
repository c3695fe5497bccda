"""Property-based tests of the public API: any input gets its documented outcome or a clear error.

Each test draws arbitrary (often hostile) input, calls the API, and checks three things: the
call did what the documentation says or raised a one-line :class:`KicksideError` (nothing
else); an oracle restating the documented rules agrees on which of the two it should be; and
afterwards no job is in an impossible state. Every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from kickside_engine import (
    CapacityDeclaration,
    ConflictError,
    Database,
    Inserted,
    InvalidArgumentError,
    JobBuilder,
    JobKind,
    JobState,
    KicksideError,
    NotFoundError,
    claim,
    control,
    enqueue,
    fail,
    get_job,
    get_job_statuses,
    list_slots,
    purge_slot,
    record,
    wake_job,
    wake_multi,
)
from kickside_engine.backoff import MAX_DELAY
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, JobFilter
from kickside_engine.control.capacity import capacity_groups, set_capacity
from kickside_engine.control.explain import explain
from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_engine.plugins.pruner import prune
from kickside_engine.redact import redact_value
from kickside_engine.slots import disable_slot, enable_slot, park_job
from kickside_engine.store.settings import set_setting

from .support import (
    PROPERTY,
    any_float,
    any_int,
    any_text,
    assert_consistent,
    attempt,
    is_name,
    is_storable,
    job_id_text,
    json_values,
    storable_text,
)

# Examples may hold megabytes of text; hypothesis warns when it prints them.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

ME = Actor("property-test", "localhost")
MAX_ARGS_BYTES = 1_000_000


def _finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _json_ok(value: dict[str, Any]) -> bool:
    if not (is_storable(value) and _finite(value)):
        return False
    return len(json.dumps(value, ensure_ascii=False).encode()) <= MAX_ARGS_BYTES


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON documents (PostgreSQL may give a whole float back as an int)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or float(a) == float(b)
    return bool(a == b)


def _identity_ok(part: str) -> bool:
    return bool(part.strip()) and len(part) <= 255 and is_storable(part)


def _tags_ok(tags: list[str]) -> bool:
    unique = list(dict.fromkeys(tags))
    return all(t and len(t) <= 255 and is_storable(t) for t in tags) and len(unique) <= 64


def _seconds(value: int) -> timedelta:
    try:
        return timedelta(seconds=value)
    except OverflowError:
        return timedelta.max if value > 0 else timedelta.min


names = st.one_of(st.sampled_from(["ok", "mailer.deliver", "a/b:c-d", "_x"]), any_text)
valid_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:\-/]{0,30}", fullmatch=True)
storable_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        any_int,
        st.floats(allow_nan=False, allow_infinity=False),
        storable_text,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(storable_text, inner, max_size=4)
    ),
    max_leaves=12,
)
valid_args = st.dictionaries(storable_text, storable_values, max_size=4)
args_dicts = st.one_of(
    st.dictionaries(any_text, json_values, max_size=4),
    st.just({"big": "x" * 1_100_000}),
    st.just({"nested": [[[[[[[[[[{"deep": "down"}]]]]]]]]]]}),
    st.just({"password": "hunter2", "url": "https://u:pw@host/x"}),
)
identity_parts = storable_text.filter(lambda t: bool(t.strip()))
ENQUEUE_FIELDS = ("worker", "queue", "args", "max_attempts", "tags", "meta", "delay", "identity")


@PROPERTY
@given(data=st.data())
def test_enqueue_stores_what_it_accepts_and_refuses_the_rest(db: Database, data: Any) -> None:
    # Most examples break one field (or none), so that valid and invalid input both occur.
    broken = set(data.draw(st.lists(st.sampled_from(ENQUEUE_FIELDS), max_size=2), label="broken"))

    def pick(field: str, valid: Any, nasty: Any) -> Any:
        return data.draw(nasty if field in broken else valid, label=field)

    worker = pick("worker", valid_names, names)
    queue = pick("queue", st.just("default") | valid_names, names)
    args = pick("args", valid_args, args_dicts)
    priority = data.draw(any_int, label="priority")
    max_attempts = pick("max_attempts", st.integers(1, 10_000), any_int)
    tags = pick("tags", st.lists(identity_parts, max_size=4), st.lists(any_text, max_size=4))
    meta = pick(
        "meta",
        st.dictionaries(storable_text, storable_values, max_size=3),
        st.dictionaries(any_text, json_values, max_size=3),
    )
    delay = pick(
        "delay",
        st.none() | st.integers(-(10**6), 10**8).map(_seconds),
        st.integers(-(10**15), 10**15).map(_seconds),
    )
    identity = pick(
        "identity",
        st.none() | st.tuples(identity_parts, identity_parts, identity_parts),
        st.tuples(any_text, any_text, any_text),
    )
    slot = identity is not None and data.draw(st.booleans(), label="slot")
    demand = slot and data.draw(st.booleans(), label="demand")

    def insert() -> Inserted:
        builder = JobBuilder(worker, args).queue(queue).priority(priority)
        builder = builder.max_attempts(max_attempts).tags(tags).meta(meta)
        if delay is not None:
            builder = builder.schedule_in(delay)
        if identity is not None:
            builder = (
                builder.slot(*identity, demand=demand) if slot else builder.identity(*identity)
            )
        return builder.insert(db)

    now = utcnow()
    result = attempt(insert)
    in_range = delay is None or timedelta(days=-700_000) < delay < timedelta(days=2_000_000)
    valid = (
        is_name(worker)
        and is_name(queue, 128)
        and 1 <= max_attempts <= 10_000
        and _json_ok(args)
        and _json_ok(meta)
        and _tags_ok(tags)
        and (identity is None or all(_identity_ok(p) for p in identity))
        and in_range
    )
    event(f"valid={valid} result={type(result).__name__}")
    if not valid:
        assert isinstance(result, KicksideError), f"accepted invalid input: {result}"
    elif identity is not None and isinstance(result, ConflictError):
        assert result.details.get("identity_in_use"), result  # documented: the identity is held
    else:
        assert isinstance(result, Inserted), f"refused valid input: {result}"
        job = get_job(db, result.id)
        assert job is not None
        if not result.duplicate:
            assert job.worker == worker and job.queue == queue
            assert job.priority == min(9, max(0, priority))
            assert job.max_attempts == max_attempts
            assert job.tags == list(dict.fromkeys(tags))
            # Stored as given (shown redacted: a redacted copy only when redaction changes them).
            assert _same_json(job.args, json.loads(json.dumps(args)))
            shown = redact_value(job.args)
            assert job.meta.get("redacted_args", job.args) == shown
            assert job.kind is (JobKind.SLOT if slot else JobKind.ONESHOT)
            expected = {JobState.AVAILABLE} if demand else {JobState.AVAILABLE, JobState.SCHEDULED}
            assert job.state in expected
            if delay is not None and delay > timedelta(seconds=5) and not demand:
                assert job.state is JobState.SCHEDULED and job.scheduled_at > now
        if identity is not None:
            assert (job.namespace, job.scope, job.identity_key) == identity
    assert_consistent(db)


@PROPERTY
@given(raw=job_id_text)
def test_any_job_id_is_parsed_or_refused(db: Database, raw: str) -> None:
    now = utcnow()
    parsed: uuid.UUID | None
    try:
        parsed = uuid.UUID(raw.strip())
    except ValueError:
        parsed = None
    assert get_job(db, raw) is None
    assert get_job_statuses(db, [raw]) == {}
    assert control.list_runs(db, raw) == []
    expected = NotFoundError if parsed is not None else InvalidArgumentError
    calls = {
        "job_detail": lambda: control.job_detail(db, raw),
        "explain": lambda: explain(db, raw, now=now),
        "retry": lambda: control.retry_job(db, raw, ME, now),
        "cancel": lambda: control.cancel_job(db, raw, ME, now),
        "discard": lambda: control.discard_job(db, raw, ME, now),
        "delete": lambda: control.delete_job(db, raw, ME, now),
        "wake": lambda: wake_job(db, raw, now=now, actor=ME),
        "park": lambda: park_job(db, raw, now=now, actor=ME),
        "enable": lambda: enable_slot(db, raw, now=now, actor=ME),
        "disable": lambda: disable_slot(db, raw, now=now, actor=ME),
    }
    for name, call in calls.items():
        result = attempt(call)
        assert isinstance(result, expected), (name, result)
    assert_consistent(db)


@PROPERTY
@given(
    states=st.lists(st.sampled_from([s.value for s in JobState]) | any_text, max_size=3),
    queues=st.lists(any_text, max_size=3),
    workers=st.lists(any_text, max_size=3),
    tags=st.lists(any_text, max_size=3),
    search=st.none() | any_text,
    limit=any_int,
)
def test_filters_take_any_text(
    db: Database,
    states: list[str],
    queues: list[str],
    workers: list[str],
    tags: list[str],
    search: str | None,
    limit: int,
) -> None:
    enqueue(db, JobBuilder("ok", {"note": "100% _done_ \\o/"}).tag("50%_off"))

    def read() -> tuple[int, int, int]:
        flt = JobFilter(
            states=tuple(states),  # type: ignore[arg-type]
            queues=tuple(queues),
            workers=tuple(workers),
            tags=tuple(tags),
            search=search,
        )
        page = control.list_jobs(db, flt, limit=limit)
        preview = control.bulk_preview(db, "cancel", flt, all_jobs=True, sample=3)
        return len(page.jobs), control.count_jobs(db, flt), preview.count

    result = attempt(read)
    valid_names = all(v and len(v) <= 255 and is_storable(v) for v in (*queues, *workers, *tags))
    valid = (
        all(s in {x.value for x in JobState} for s in states)
        and valid_names
        and (search is None or (len(search) <= 1000 and is_storable(search)))
        and 1 <= limit <= 1000
    )
    if valid:
        assert not isinstance(result, KicksideError), result
        listed, counted, cancellable = result
        assert listed == min(counted, limit) and cancellable <= counted
    else:
        assert isinstance(result, InvalidArgumentError), result
    assert_consistent(db)


@PROPERTY
@given(namespace=any_text, scope=any_text, key=any_text, demand=st.booleans())
def test_slot_identities_take_any_text(
    db: Database, namespace: str, scope: str, key: str, demand: bool
) -> None:
    identity = (namespace, scope, key)
    storable = all(is_storable(p) for p in identity)
    listed = attempt(lambda: list_slots(db, namespace=namespace, scope=scope))
    assert isinstance(listed, list) == (is_storable(namespace) and is_storable(scope)), listed

    def wake_all() -> Any:
        with db.begin() as conn:
            return wake_multi(db, [identity], conn=conn)

    woken = attempt(wake_all)
    wakeable = all(p and len(p) <= 255 for p in identity) and storable
    assert isinstance(woken, KicksideError) != wakeable, woken
    enrolled = attempt(
        lambda: enqueue(db, JobBuilder("ok", {}).slot(namespace, scope, key, demand=demand))
    )
    valid = all(_identity_ok(p) for p in identity)
    assert isinstance(enrolled, Inserted) == valid, enrolled
    purged = attempt(lambda: purge_slot(db, namespace=namespace, scope=scope, key=key, actor=ME))
    if valid:
        assert purged == 1  # nothing ran, so nothing is left to wait for
        assert list_slots(db, namespace=namespace, scope=scope) == []
    elif not (all(p.strip() for p in identity) and storable):
        assert isinstance(purged, InvalidArgumentError), purged
    assert_consistent(db)


@PROPERTY
@given(
    global_limit=any_int,
    per_key_limit=any_int,
    namespace=storable_text | any_text,
    raw_setting=json_values,
)
def test_capacity_settings_take_any_numbers_and_claims_never_exceed_them(
    db: Database, global_limit: int, per_key_limit: int, namespace: str, raw_setting: Any
) -> None:
    now = utcnow()
    written = attempt(
        lambda: set_capacity(
            db,
            namespace,
            global_limit=global_limit,
            per_key_limit=per_key_limit,
            actor=ME,
            now=now,
            create=True,
        )
    )
    valid = (
        global_limit >= 0
        and per_key_limit >= 0
        and bool(namespace.strip())
        and len(namespace) <= 255
        and is_storable(namespace)
    )
    assert isinstance(written, dict) == valid, written
    # Any JSON may end up in a setting by hand; the limits read from it are validated at claim.
    group = CapacityDeclaration(group="g", settings_namespace="props.capacity")
    stored = attempt(lambda: set_setting(db, "props.capacity", "global_limit", raw_setting))
    assert isinstance(stored, KicksideError) != (is_storable(raw_setting) and _finite(raw_setting))
    set_setting(db, "props.capacity", "concurrency_key_limit", 1)
    for key in ("a", "a", "b"):
        enqueue(db, JobBuilder("ok", {}, capacity=group).queue("cap").concurrency_key(key))
    claimed = claim(db, queue="cap", node="props", limit=3)
    info = {g.group: g for g in capacity_groups(db, now)}["g"]
    limit = info.global_limit
    if limit is None:
        assert claimed == [] and info.problem  # invalid limits admit nothing, and say why
    else:
        assert len(claimed) <= min(limit, 2)  # one per key, two keys
    for c in claimed:
        control.cancel_job(db, c.job.id, ME, now)
    assert_consistent(db)


@PROPERTY
@given(n=any_int, seconds=any_float)
def test_counts_and_durations_take_any_number(db: Database, n: int, seconds: float) -> None:
    now = utcnow()
    checks = {
        "list_jobs": (lambda: control.list_jobs(db, limit=n), 1 <= n <= 1000),
        "list_audit": (lambda: control.list_audit(db, limit=n), 1 <= n <= 1000),
        "list_slots": (lambda: list_slots(db, limit=n), 1 <= n <= 10_000),
        "bulk_preview": (
            lambda: control.bulk_preview(db, "retry", JobFilter(), all_jobs=True, sample=n),
            0 <= n <= 100,
        ),
        "max_attempts": (lambda: JobBuilder("ok").max_attempts(n), 1 <= n <= 10_000),
        "priority": (lambda: JobBuilder("ok").priority(n), True),
    }
    for name, (call, valid) in checks.items():
        result = attempt(call)
        assert isinstance(result, KicksideError) != valid, (name, result)
    if math.isfinite(seconds) and abs(seconds) < timedelta.max.total_seconds():
        age = timedelta(seconds=seconds)
        pruned = attempt(lambda: prune(db, now, max_age=age))
        assert isinstance(pruned, int) == (age >= timedelta(0)), pruned
        execution = attempt(lambda: JobBuilder("ok").max_execution(age))
        valid_execution = timedelta(milliseconds=1) <= age
        assert isinstance(execution, KicksideError) != valid_execution, execution
    assert_consistent(db)


@PROPERTY
@given(ms=any_float | any_int, snooze_s=st.integers(-(10**15), 10**15))
def test_retry_hints_and_snoozes_take_any_duration(db: Database, ms: float, snooze_s: int) -> None:
    queue = f"hints_{uuid.uuid4().hex[:12]}"
    for _ in range(2):
        enqueue(db, JobBuilder("ok", {}).queue(queue).max_attempts(5))
    first, second = claim(db, queue=queue, node="props", limit=2)
    failed = attempt(lambda: fail(db, first, "boom", retry_after_ms=ms))
    valid = not isinstance(ms, bool) and math.isfinite(ms) and ms >= 0
    assert isinstance(failed, KicksideError) != valid, failed
    if valid:  # documented: a floor, capped at MAX_DELAY
        job = get_job(db, first.job.id)
        assert job is not None and job.state is JobState.RETRYABLE
        assert job.scheduled_at <= utcnow() + MAX_DELAY + timedelta(minutes=1)
    else:  # refused before anything was written: still executing, still leased
        control.cancel_job(db, first.job.id, ME, utcnow())
    snoozed = record(
        db, [(second, ExecutionResult(ResultKind.SNOOZE, utcnow(), 1, snooze=_seconds(snooze_s)))]
    )
    assert snoozed == {second.job.id}
    job = get_job(db, second.job.id)
    assert job is not None and job.state is JobState.SCHEDULED
    assert job.scheduled_at <= utcnow() + MAX_DELAY
    assert_consistent(db)
