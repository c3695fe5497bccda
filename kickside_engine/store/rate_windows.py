"""Rate limits of capacity groups: the ``N/unit`` syntax and the fixed-window counters.

A rate limit such as ``600/min`` admits at most 600 job starts in each window of one minute.
Windows are fixed and aligned to the UTC epoch (13:04:00 to 13:05:00, ...), and the starts of
each window are counted in one row of ``kickside_rate_window`` per group and window (key ``''``)
and one per group, concurrency key and window. The claim reads the rows of the windows it
admits into and adds what it claimed, in its own transaction and under the admission lock
(:mod:`kickside_engine.store.keyed_claims`), so every pool on every machine shares one count.

Why fixed windows rather than a sliding log of start times: the count is one primary-key row
per group or key, whatever the limit, where a sliding window reads every start of the last
window (3,600 rows for ``3600/h``) at every claim; and under a backlog both admit exactly the
limit per window. The price is the boundary: at most N starts in each calendar window, but up
to 2N in a window-long span that straddles two windows (the end of one, the start of the next).
Rows of ended windows guard nothing; the Pruner deletes them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, select

from kickside_engine.clock import UNIX_EPOCH
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.store.database import Database

#: Window units a rate may name, in seconds.
UNITS = {"s": 1, "min": 60, "h": 3600}
UNIT_WORDS = {1: "second", 60: "minute", 3600: "hour"}
#: The key of a group's own counter (concurrency keys are never empty).
GROUP_KEY = ""
_RATE = re.compile(r"(\d{1,9})/(s|min|h)")


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` starts per window of ``window_seconds``."""

    limit: int
    window_seconds: int

    def __str__(self) -> str:
        unit = next(u for u, s in UNITS.items() if s == self.window_seconds)
        return f"{self.limit}/{unit}"

    @property
    def window_word(self) -> str:
        """``"minute"`` for ``600/min``: as in "60/60 this minute"."""
        return UNIT_WORDS[self.window_seconds]

    def window_at(self, now: datetime) -> tuple[datetime, datetime]:
        """The window holding ``now``: its start (included) and end (excluded)."""
        elapsed = int((now - UNIX_EPOCH).total_seconds())
        start = UNIX_EPOCH + timedelta(seconds=elapsed - elapsed % self.window_seconds)
        return start, start + timedelta(seconds=self.window_seconds)


def parse_rate(text: Any) -> Rate:
    """A rate from its ``N/unit`` text (``600/min``, ``10/s``, ``3600/h``).

    Raises :class:`InvalidArgumentError` naming the bad value and the syntax.
    """
    match = _RATE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        units = ", ".join(UNITS)
        raise InvalidArgumentError(
            f"rate limit must be N/unit with a whole number N >= 0 and unit one of {units} "
            f"(e.g. 600/min), got {text!r}"
        )
    return Rate(int(match.group(1)), UNITS[match.group(2)])


def rate_value(value: Any) -> Rate | None:
    """A rate limit as stored in a setting, else None (invalid: admission fails closed)."""
    try:
        return parse_rate(value)
    except InvalidArgumentError:
        return None


def window_counts(
    db: Database,
    conn: Connection,
    group: str,
    keys: Iterable[str] | None,
    window: tuple[datetime, datetime],
) -> dict[str, int]:
    """The starts counted so far in ``window`` for ``group`` and each of ``keys`` (``''``: the
    group's own count; None: every key and the group); keys without a row have none."""
    table = db.tables.rate_window
    stmt = select(table.c.concurrency_key, table.c.admitted).where(
        table.c.capacity_group == group,
        table.c.window_start == window[0],
        table.c.window_end == window[1],
    )
    if keys is not None:
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        stmt = stmt.where(table.c.concurrency_key.in_(wanted))
    rows = conn.execute(stmt).all()
    return {key: int(admitted) for key, admitted in rows}


def add_window_counts(
    db: Database, conn: Connection, counts: dict[tuple[str, str, datetime, datetime], int]
) -> None:
    """Add started jobs to their windows' counts, keyed ``(group, key, start, end)``."""
    if not counts:
        return
    table = db.tables.rate_window
    stmt = db.upsert_insert(table)
    stmt = stmt.on_conflict_do_update(
        index_elements=["capacity_group", "concurrency_key", "window_start", "window_end"],
        set_={"admitted": table.c.admitted + stmt.excluded.admitted},
    )
    conn.execute(
        stmt,
        [
            {
                "capacity_group": group,
                "concurrency_key": key,
                "window_start": start,
                "window_end": end,
                "admitted": n,
            }
            for (group, key, start, end), n in sorted(counts.items())
        ],
    )


def delete_ended_windows(db: Database, before: datetime) -> int:
    """Delete the counters of windows that ended before ``before``; returns how many."""
    table = db.tables.rate_window
    with db.begin() as conn:
        return int(conn.execute(delete(table).where(table.c.window_end < before)).rowcount)
