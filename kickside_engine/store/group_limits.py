"""A capacity group's limits, read from its declared Settings namespace at every claim.

Two concurrency limits are required (a missing or invalid one refuses admission); two rate
limits are optional (not set: no rate limit; set but invalid: admission refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from kickside_engine.store.database import Database
from kickside_engine.store.rate_windows import Rate, rate_value
from kickside_engine.store.settings import limit_value


@dataclass(frozen=True)
class GroupLimits:
    """A capacity group's limits as read now; ``problem`` says why admission is refused.

    ``rate`` and ``per_key_rate`` are None when not set (no rate limit)."""

    global_limit: int | None
    per_key_limit: int | None
    problem: str | None
    rate: Rate | None = None
    per_key_rate: Rate | None = None

    @property
    def usable(self) -> bool:
        """Whether admission may use these limits (both read and valid)."""
        return self.problem is None and None not in (self.global_limit, self.per_key_limit)


def read_group_limits(db: Database, conn: Connection, declaration: dict[str, Any]) -> GroupLimits:
    """Read a group's limits from its declared Settings namespace."""
    setting = db.tables.setting
    namespace = declaration.get("settings_namespace")
    gkey = declaration.get("global_limit_key")
    kkey = declaration.get("concurrency_key_limit_key")
    # Jobs enqueued before rate limits existed name no rate keys: the defaults apply.
    rkey = declaration.get("rate_limit_key", "rate_limit")
    pkey = declaration.get("rate_limit_per_key_key", "rate_limit_per_key")
    names = (namespace, gkey, kkey, rkey, pkey)
    if not all(isinstance(name, str) for name in names):
        return GroupLimits(None, None, "capacity declaration on the job is malformed")
    rows = dict(
        conn.execute(
            select(setting.c.key, setting.c.value).where(
                setting.c.namespace == namespace, setting.c.key.in_([gkey, kkey, rkey, pkey])
            )
        ).all()
    )
    problems: list[str] = []
    limits: list[int | None] = []
    for key in (gkey, kkey):
        if key not in rows:
            problems.append(f"setting {namespace}/{key} is missing")
            limits.append(None)
            continue
        value = limit_value(rows[key])
        if value is None:
            problems.append(f"setting {namespace}/{key} is invalid ({rows[key]!r})")
        limits.append(value)
    rates: list[Rate | None] = []
    for key in (rkey, pkey):
        rate = rate_value(rows[key]) if key in rows else None
        if key in rows and rate is None:
            problems.append(f"setting {namespace}/{key} is not a rate like 600/min ({rows[key]!r})")
        rates.append(rate)
    return GroupLimits(limits[0], limits[1], "; ".join(problems) or None, rates[0], rates[1])
