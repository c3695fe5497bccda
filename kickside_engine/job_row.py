"""A job's row as stored: the options a builder collects, checked and turned into a row.

Args must be a JSON object, and are stored and delivered exactly as given: args that JSON
cannot hold as they are (a cycle, a set, a non-string key, NaN) are refused with the place and
the reason, never rewritten. A typed value (a dataclass, a pydantic model, a msgspec Struct)
is stored as its JSON encoding, which the worker's ``args_type`` decodes back
(:mod:`kickside_engine.typed_args`). Args hold ids, not secrets; still, wherever they are
shown, logged or searched they are redacted (:mod:`kickside_engine.redact`). For that, the row
records in the job's meta the sensitive key names its worker, registry or builder declares
(``meta["sensitive_keys"]``) and, when redaction changes the args, their redacted copy
(``meta["redacted_args"]``), which is what a search reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from kickside_engine.clock import ensure_aware
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.ids import uuid7
from kickside_engine.models import JobKind, JobState
from kickside_engine.redact import (
    REDACTED_ARGS_META,
    SENSITIVE_KEYS_META,
    redact_value,
    sensitive_key_names,
)
from kickside_engine.store.copy_text import encode_json
from kickside_engine.text import require_storable_json, require_text, validate_name
from kickside_engine.typed_args import encode_args
from kickside_engine.uniqueness import Unique

if TYPE_CHECKING:
    from kickside_engine.workers import CapacityDeclaration

MAX_ATTEMPTS_LIMIT = 10_000
MAX_TAGS = 64
MAX_ARGS_BYTES = 1_000_000


@dataclass(frozen=True)
class JobOptions:
    """Everything a builder will write; validated when the job is inserted."""

    worker: str
    args: dict[str, Any]
    queue: str = "default"
    priority: int = 0
    scheduled_at: datetime | None = None
    schedule_in: timedelta | None = None
    max_attempts: int = 20
    tags: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    unique: Unique | None = None
    max_execution_ms: int | None = None
    concurrency_key: str | None = None
    namespace: str | None = None
    scope: str | None = None
    identity_key: str | None = None
    kind: JobKind = JobKind.ONESHOT
    demand: bool = False
    capacity: CapacityDeclaration | None = None
    sensitive_keys: frozenset[str] = frozenset()


def args_dict(args: Any) -> dict[str, Any]:
    """Args as given to enqueue, as a dict: a typed value (a dataclass, a pydantic model, a
    msgspec Struct...) is encoded to its JSON object here (:mod:`kickside_engine.typed_args`)."""
    if type(args) is dict:
        return dict(args)
    return encode_args(args)


def checked_max_attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"max_attempts must be an integer, got {value!r}")
    if not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise InvalidArgumentError(f"max_attempts must be 1..{MAX_ATTEMPTS_LIMIT}, got {value}")
    return value


def _json_object(value: Mapping[str, Any], field_name: str) -> dict[str, Any]:
    """``value`` as stored: JSON that decodes to exactly ``value`` (lists for tuples), or an
    :class:`InvalidArgumentError` that says what in it JSON cannot hold, and where."""
    try:
        encoded = encode_json(value)
    except (TypeError, ValueError, RecursionError) as exc:
        problem = _json_problem(value, field_name)
        if problem is None and isinstance(exc, RecursionError):
            problem = "they are nested too deeply"
        raise InvalidArgumentError(
            f"{field_name} cannot be stored as JSON: {problem or exc}"
        ) from None
    require_storable_json(encoded, field_name)
    if len(encoded.encode()) > MAX_ARGS_BYTES:
        raise InvalidArgumentError(f"{field_name} exceed {MAX_ARGS_BYTES} bytes as JSON")
    try:
        decoded: dict[str, Any] = json.loads(encoded)
    except RecursionError:
        raise InvalidArgumentError(f"{field_name} are nested too deeply") from None
    # JSON writes a key 1 as "1" and a tuple as a list: the first would silently change the
    # data the worker gets, so it is refused; lists for tuples are what JSON has.
    if decoded != value:
        problem = _json_problem(value, field_name)
        if problem is not None:
            raise InvalidArgumentError(f"{field_name} cannot be stored as JSON: {problem}")
    return decoded


def _json_problem(value: Any, field_name: str) -> str | None:
    """What in ``value`` JSON cannot store as it is (with its place, e.g. ``args['a'][0]``),
    or None: a cycle, a key that is not a string, a value that is not JSON, NaN or infinity.
    Walks with an explicit stack, each container once."""
    stack: list[tuple[Any, str, bool]] = [(value, field_name, False)]
    on_path: set[int] = set()
    checked: set[int] = set()
    while stack:
        item, place, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            checked.add(id(item))
            continue
        if isinstance(item, dict | list | tuple):
            if id(item) in on_path:
                return f"{place} refers back to a container it is inside (a cycle)"
            if id(item) in checked:
                continue
            on_path.add(id(item))
            stack.append((item, place, True))
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return (
                            f"{place} has the key {key!r} ({type(key).__name__}): "
                            "JSON object keys are strings"
                        )
                    stack.append((child, f"{place}[{key!r}]", False))
            else:
                stack.extend((child, f"{place}[{i}]", False) for i, child in enumerate(item))
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{place} is {item!r}, which JSON cannot hold"
        elif not (item is None or isinstance(item, str | int)):
            return (
                f"{place} is of type {type(item).__name__}, not a JSON value "
                "(a dict, list, string, number, boolean or None)"
            )
    return None


def _identity_part(value: Any, field_name: str) -> str:
    return require_text(value, field_name)


def stored_args(args: Any) -> dict[str, Any]:
    """``args`` as stored: checked to be a JSON object with string keys, kept as given."""
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise InvalidArgumentError("args must be a JSON object with string keys")
    # An empty object has nothing to check: skip the JSON round trip (the usual case).
    return _json_object(args, "args") if args else {}


def _declared_keys(opts: JobOptions, meta: dict[str, Any]) -> frozenset[str]:
    """The sensitive key names declared for this job: its worker's and registry's, its
    builder's, and any ``meta["sensitive_keys"]`` given (recorded back, sorted, in meta)."""
    declared = opts.sensitive_keys
    if SENSITIVE_KEYS_META in meta:
        declared |= sensitive_key_names(meta[SENSITIVE_KEYS_META], "meta['sensitive_keys']")
    if declared:
        meta[SENSITIVE_KEYS_META] = sorted(declared)
    return declared


def redacted_copy(args: dict[str, Any], declared: frozenset[str]) -> Any:
    """The args as shown, when redaction changes them (None otherwise): what search reads."""
    if not args:
        return None
    shown = redact_value(args, declared)
    return None if shown == args else shown


def build_row(opts: JobOptions, now: datetime) -> dict[str, Any]:
    """Validate ``opts`` and build the ``kickside_job`` row to insert at ``now``."""
    worker = validate_name(opts.worker, "worker")
    queue = validate_name(opts.queue, "queue", max_length=128)
    if isinstance(opts.priority, bool) or not isinstance(opts.priority, int):
        raise InvalidArgumentError(f"priority must be an integer, got {opts.priority!r}")
    priority = min(9, max(0, opts.priority))
    max_attempts = checked_max_attempts(opts.max_attempts)
    args = stored_args(opts.args)
    meta = {} if opts.meta == {} else _json_object(dict(opts.meta), "meta")
    # The search copy is the engine's: one given (copied from another job's meta) is replaced.
    meta.pop(REDACTED_ARGS_META, None)
    declared = _declared_keys(opts, meta)
    shown = redacted_copy(args, declared)
    if shown is not None:
        meta[REDACTED_ARGS_META] = shown
    tags: list[str] = []
    for tag in opts.tags:
        if not isinstance(tag, str) or not tag:
            raise InvalidArgumentError(f"tags must be non-empty strings (≤255), got {tag!r}")
        require_text(tag, "tag", allow_empty=True)
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise InvalidArgumentError(f"at most {MAX_TAGS} tags, got {len(tags)}")
    if opts.scheduled_at is not None:
        scheduled_at = ensure_aware(opts.scheduled_at, "schedule_at")
    elif opts.schedule_in is not None:
        try:
            scheduled_at = now + opts.schedule_in
        except OverflowError:
            raise InvalidArgumentError(
                f"schedule_in {opts.schedule_in} is out of range (years 1..9999)"
            ) from None
    else:
        scheduled_at = now
    max_execution_ms = opts.max_execution_ms
    if max_execution_ms is not None and (
        isinstance(max_execution_ms, bool)
        or not isinstance(max_execution_ms, int)
        or not 0 < max_execution_ms <= 30 * 24 * 3600 * 1000
    ):
        raise InvalidArgumentError(f"max_execution_ms must be 1..30 days, got {max_execution_ms!r}")
    identity = (opts.namespace, opts.scope, opts.identity_key)
    if opts.kind is JobKind.SLOT or identity != (None, None, None):
        identity = (
            _identity_part(opts.namespace, "namespace"),
            _identity_part(opts.scope, "scope"),
            _identity_part(opts.identity_key, "key"),
        )
    concurrency_key = opts.concurrency_key
    if concurrency_key is not None:
        concurrency_key = _identity_part(concurrency_key, "concurrency_key")
    if opts.capacity is not None:
        if concurrency_key is None:
            raise InvalidArgumentError(
                f"worker {worker!r} declares capacity group {opts.capacity.group!r}: "
                "its jobs need a non-empty concurrency_key"
            )
        meta["capacity"] = opts.capacity.as_meta()
    unique_key = None
    if opts.unique is not None:
        meta["unique_states"] = opts.unique.states
        unique_key = opts.unique.key(worker, queue, args, now)
    state = JobState.SCHEDULED if scheduled_at > now else JobState.AVAILABLE
    return {
        "id": uuid7(),
        "kind": opts.kind.value,
        "state": state.value,
        "queue": queue,
        "worker": worker,
        "args": args,
        "meta": meta,
        "tags": tags,
        "errors": [],
        "attempt": 0,
        "max_attempts": max_attempts,
        "priority": priority,
        "unique_key": unique_key,
        "namespace": identity[0],
        "scope": identity[1],
        "identity_key": identity[2],
        "concurrency_key": concurrency_key,
        "capacity_group": opts.capacity.group if opts.capacity is not None else None,
        "demand_pending": False,
        "control_pending": False,
        "demand_seq": 0,
        "rescue_count": 0,
        "max_execution_ms": max_execution_ms,
        "inserted_at": now,
        "scheduled_at": scheduled_at,
        "updated_at": now,
    }
