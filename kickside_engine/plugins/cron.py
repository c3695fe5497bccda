"""Cron: recurring jobs, each run enqueued exactly once across every node.

A schedule is a list of :class:`Recurring` entries (a unique key, a cron expression, a function
that builds the job and, optionally, the timezone the expression is read in)::

    SCHEDULE = [
        Recurring("cleanup", "@hourly", lambda: JobBuilder("cleanup")),
        Recurring("weekly_digest", "0 8 * * MON", lambda: JobBuilder("digest").priority(5),
                  timezone="Europe/Berlin"),
    ]

Every node ticks every second. A tick takes each entry's latest due time (inclusive of ``now``),
skips it when it is more than a minute old (a node booting at 09:40 does not replay the 08:00
run), and claims the run by inserting ``(key, run_at)`` into ``kickside_recurring_execution``;
the unique constraint lets exactly one node win, and the winner enqueues the job in the same
transaction.

Expressions have five fields (or six, seconds first) as cronsim reads them, or one of the
nicknames in :data:`NICKNAMES`. An entry's timezone is an IANA name (``zoneinfo``; default
UTC). Across a daylight-saving change an expression at a fixed time of day (minute and hour both
given, like ``30 2 * * *``) follows Debian cron, so each day's run happens exactly once:

- a wall time that the clocks skip (``30 2 * * *`` in Europe/Berlin on the spring-forward day,
  02:00 jumps to 03:00) runs at the first minute after the gap: 03:00 local;
- a wall time that happens twice (``0 1 * * *`` in America/New_York on the fall-back day)
  runs once, at its first occurrence (01:00 EDT, not again at 01:00 EST).

An expression with a wildcard or step in the minute or hour (``0 * * * *``, ``*/15 * * * *``)
follows real time instead: hourly runs every real hour, twice in the repeated hour and
never at the skipped one. Due times are stored and shown in UTC.
"""

from __future__ import annotations

import logging
import uuid
import zoneinfo
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from cronsim import CronSim, CronSimError

from kickside_engine.builder import JobBuilder
from kickside_engine.clock import ensure_aware
from kickside_engine.enqueue import enqueue
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.models import Inserted
from kickside_engine.redact import redact_text
from kickside_engine.store.database import Database
from kickside_engine.store.maintenance import attach_cron_job, record_cron_run
from kickside_engine.store.notify import local_signal

log = logging.getLogger("kickside.plugins.cron")

#: A due time older than this when a node first sees it is skipped, not replayed.
MAX_LATENESS = timedelta(seconds=60)

#: The nicknames an expression may be (cronsim reads only fields), and what each stands for.
#: ``@reboot`` has no meaning for a shared schedule and is refused.
NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: When a schedule is built, each expression must occur after this (cronsim looks 50 years on).
_PROBE = datetime(2000, 1, 1, tzinfo=UTC)


def expand(cron: str) -> str:
    """The fields ``cron`` stands for: a nickname's expression, else ``cron`` itself."""
    if not isinstance(cron, str) or not cron.strip():
        raise InvalidArgumentError(f"cron expression must be a non-empty string, got {cron!r}")
    text = cron.strip()
    if text.startswith("@"):
        fields = NICKNAMES.get(text.lower())
        if fields is None:
            raise InvalidArgumentError(
                f"invalid cron expression {cron!r}: unknown nickname (use one of "
                f"{', '.join(NICKNAMES)})"
            )
        return fields
    return text


def zone(name: str) -> tzinfo:
    """The timezone named ``name`` (IANA, e.g. ``Europe/Berlin``; ``UTC``), or a clear error."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"timezone must be an IANA name like 'UTC', got {name!r}")
    if name == "UTC":
        return UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidArgumentError(
            f"unknown timezone {name!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
        ) from None


@dataclass(frozen=True)
class Recurring:
    """One schedule entry: ``job()`` is enqueued at every occurrence of ``cron`` in ``timezone``.

    The entry is checked when it is built: a bad key, expression or timezone raises
    :class:`InvalidArgumentError` naming the entry, so a broken schedule fails at import.
    """

    key: str
    cron: str
    job: Callable[[], JobBuilder]
    timezone: str = field(default="UTC", kw_only=True)

    def __post_init__(self) -> None:
        key = self.key
        if not isinstance(key, str) or not key.strip() or len(key) > 255:
            raise InvalidArgumentError(
                f"cron entry key must be a non-empty string of at most 255 characters, got {key!r}"
            )
        if not callable(self.job):
            raise InvalidArgumentError(f"cron entry {key!r}: job must be callable")
        try:
            next_run(self.cron, _PROBE, timezone=self.timezone)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"cron entry {key!r}: {exc}") from None

    def previous_run(self, now: datetime) -> datetime:
        """This entry's latest due time at or before ``now`` (UTC)."""
        return previous_run(self.cron, now, timezone=self.timezone)

    def next_run(self, now: datetime) -> datetime:
        """This entry's first due time after ``now`` (UTC)."""
        return next_run(self.cron, now, timezone=self.timezone)


@dataclass(frozen=True)
class CronFire:
    """A run this node claimed and enqueued (``duplicate``: a unique job already existed)."""

    key: str
    run_at: datetime
    job_id: uuid.UUID
    duplicate: bool = False


def _iterate(cron: str, start: datetime, timezone: str, *, reverse: bool) -> CronSim:
    fields = expand(cron)
    local = start.astimezone(zone(timezone))
    try:
        return CronSim(fields, local, reverse=reverse)
    except CronSimError as exc:
        raise InvalidArgumentError(f"invalid cron expression {cron!r}: {exc}") from None
    except (ValueError, IndexError) as exc:  # cronsim lets a few malformed fields through
        raise InvalidArgumentError(f"invalid cron expression {cron!r}: {exc}") from None


def _step(it: CronSim, cron: str) -> datetime:
    try:
        found: datetime = next(it)
    except StopIteration:
        raise InvalidArgumentError(f"cron expression {cron!r} never occurs") from None
    return found.astimezone(UTC)


def next_run(cron: str, now: datetime, *, timezone: str = "UTC") -> datetime:
    """The first occurrence of ``cron`` (read in ``timezone``) strictly after ``now``, in UTC."""
    now = ensure_aware(now, "now")
    it = _iterate(cron, now, timezone, reverse=False)
    found = _step(it, cron)
    # Starting inside a repeated hour, cronsim can answer the hour's first pass, which is
    # already past: the schedule's next run is the one after it.
    while found <= now:
        found = _step(it, cron)
    return found


def previous_run(cron: str, now: datetime, *, timezone: str = "UTC") -> datetime:
    """The latest occurrence of ``cron`` (read in ``timezone``) at or before ``now``, in UTC.

    Occurrences are the ones :func:`next_run` walks through, so the two agree across a
    daylight-saving change.
    """
    now = ensure_aware(now, "now")
    # CronSim's reverse iteration is exclusive at an exact occurrence; starting one second
    # after the whole second of ``now`` makes it inclusive of that second (and no later).
    # The second is added in UTC: adding it to a local time would add it to the wall clock.
    start = now.replace(microsecond=0) + timedelta(seconds=1)
    found = _step(_iterate(cron, start, timezone, reverse=True), cron)
    if timezone == "UTC":
        return found
    # Reading a repeated hour backwards, cronsim can step over the occurrence that walking
    # forwards reaches (the first pass of 01:30 seen from 01:15 on the second pass): walk
    # forward from its answer to the last occurrence at or before ``now``.
    it = _iterate(cron, found, timezone, reverse=False)
    while (following := _step(it, cron)) <= now:
        found = following
    return found


def validate_schedule(entries: Iterable[Recurring]) -> None:
    """Check every entry is a :class:`Recurring` and keys are unique; the error names the entry.

    Each entry checked its own key, expression and timezone when it was built.
    """
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, Recurring):
            raise InvalidArgumentError(f"schedule entry {index} is not a Recurring: {entry!r}")
        if entry.key in seen:
            raise InvalidArgumentError(f"schedule entry {entry.key!r}: duplicate key")
        seen.add(entry.key)


def cron_tick(db: Database, entries: Sequence[Recurring], now: datetime) -> list[CronFire]:
    """Enqueue every entry whose latest due time is at most a minute before ``now``.

    Safe to run on every node at once: a run is enqueued by whichever node records it first.
    An entry whose due time cannot be computed, or whose job cannot be built, is logged and
    skipped; the others still fire.
    """
    now = ensure_aware(now, "now")
    fired: list[CronFire] = []
    for entry in entries:
        try:
            run_at = entry.previous_run(now)
        except InvalidArgumentError as exc:
            log.error(
                "cron entry %r skipped: %s",
                entry.key,
                exc,
                extra={"plugin": "cron", "cron_key": entry.key},
            )
            continue
        if now - run_at > MAX_LATENESS:
            continue
        try:
            builder = entry.job().tag("cron").meta({"cron": entry.key})
            fire = _claim_and_enqueue(db, entry.key, run_at, builder, now)
        except InvalidArgumentError as exc:
            log.error(
                "cron entry %r could not enqueue its job: %s",
                entry.key,
                exc,
                extra={"plugin": "cron", "cron_key": entry.key},
            )
            continue
        if fire is not None:
            fired.append(fire)
    if fired:
        log.debug("cron fired", extra={"plugin": "cron", "count": len(fired)})
    return fired


def _claim_and_enqueue(
    db: Database, key: str, run_at: datetime, builder: JobBuilder, now: datetime
) -> CronFire | None:
    with db.begin() as conn:
        run_id = record_cron_run(db, conn, key, run_at)
        if run_id is None:
            return None  # another node (or an earlier tick) owns this run
        inserted: Inserted = enqueue(db, builder, conn=conn, now=now)
        attach_cron_job(db, conn, run_id, inserted.id)
    if not inserted.duplicate:
        # enqueue woke local pools before our commit; wake them again now the job is visible.
        local_signal(db).wake(builder.options.queue)
    return CronFire(key=key, run_at=run_at, job_id=inserted.id, duplicate=inserted.duplicate)


class SchedulePublication:
    """What a node publishes of its schedule on every heartbeat (``kickside_node.schedule``).

    One JSON object per entry: ``key``, ``expression`` (as written), ``timezone``,
    ``next_run`` (ISO-8601 UTC), and the ``worker`` and ``queue`` of the job it enqueues
    (``job()`` is called once, here, to learn them; ``error`` says why when it fails). Next due
    times are computed again only once they have passed, so a heartbeat costs nothing per entry.
    """

    def __init__(self, entries: Sequence[Recurring]) -> None:
        self.entries = tuple(entries)
        self._fixed = [_describe(entry) for entry in self.entries]
        self._next: list[datetime | None] = [None] * len(self.entries)

    def document(self, now: datetime) -> list[dict[str, Any]]:
        """The published entries at ``now``."""
        now = ensure_aware(now, "now")
        published = []
        for index, entry in enumerate(self.entries):
            upcoming = self._next[index]
            if upcoming is None or upcoming <= now:
                try:
                    upcoming = entry.next_run(now)
                except InvalidArgumentError:
                    upcoming = None
                self._next[index] = upcoming
            published.append(
                {
                    **self._fixed[index],
                    "next_run": upcoming.isoformat() if upcoming is not None else None,
                }
            )
        return published


def _describe(entry: Recurring) -> dict[str, Any]:
    described: dict[str, Any] = {
        "key": entry.key,
        "expression": entry.cron,
        "timezone": entry.timezone,
        "worker": None,
        "queue": None,
    }
    try:
        options = entry.job().options
    except Exception as exc:  # the application's code: whatever it raises, publish the rest
        described["error"] = redact_text(f"job() failed: {type(exc).__name__}: {exc}")[:500]
    else:
        described["worker"], described["queue"] = options.worker, options.queue
    return described
