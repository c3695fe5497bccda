"""Capacity groups: limits from Settings, usage now, per-key usage and refused admissions.

Rate limits show the starts of the current window against the limit (``3/600 /min``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from kickside_engine.control import CapacityGroupInfo
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.format import count, short_id
from kickside_tui.widgets.tables import Row
from kickside_tui.widgets.view_table import Col, Ordered, ViewTable, job_key

GROUPS = (
    Col("group", "group"),
    Col("global", "global"),
    Col("per key limit", "per key limit", "per key"),
    Col("rate", "rate", drop=1),
    Col("key rate", "key rate", drop=2),
    Col("waiting", "waiting"),
    Col("settings", "settings", drop=2, flex=True),
    Col("problem", "problem", drop=1, flex=True),
)
KEYS = (
    Col("group", "group"),
    Col("concurrency key", "concurrency key", "key"),
    Col("executing", "executing", "exec"),
    Col("rate", "rate", drop=1),
)
WAITING = (
    Col("job", "job"),
    Col("group", "group", drop=1),
    Col("concurrency key", "concurrency key", "key"),
    Col("reason", "reason", flex=True),
)


def _usage(used: int, limit: int | None) -> Text:
    if limit is None:
        return Text(f"{used}/?", style="bold red")
    style = "bold red" if used >= limit else "dark_orange" if used >= 0.8 * limit else ""
    return Text(f"{used}/{limit}", style=style, justify="right")


def _rate_usage(used: int, rate: str | None) -> Text:
    """``3/600 /min``: starts this window against the rate; ``-`` without one."""
    if rate is None:
        return Text("-", style="dim", justify="right")
    limit, _, unit = rate.partition("/")
    usage = _usage(used, int(limit))
    usage.append(f" /{unit}", style="dim")
    return usage


class CapacityScreen(ViewScreen):
    """Read-only: limits change through Settings (``kickside capacity set``)."""

    VIEW = "capacity"

    def compose_body(self) -> ComposeResult:
        with Vertical(id="capacity"):
            yield ViewTable(GROUPS, id="groups", copy_what="group")
            yield Static("Per concurrency key", classes="section")
            yield ViewTable(
                KEYS,
                id="keys",
                copy_what="concurrency key",
                copy_value=lambda key: key.partition("\x00")[2] or None,
            )
            yield Static("Refused admission (due, not admitted now)", classes="section")
            yield ViewTable(WAITING, id="waiting", copy_what="job id", job_of=job_key)

    def fetch(self, now: datetime) -> list[CapacityGroupInfo]:
        return self.adapter.capacity(now)

    def show(self, data: Any, now: datetime) -> None:
        groups: list[CapacityGroupInfo] = data
        group_rows: list[Row] = []
        key_rows: list[Row] = []
        waiting_rows: list[Row] = []
        for g in groups:
            keys = [g.global_limit_key, g.concurrency_key_limit_key]
            keys += [g.rate_limit_key] if g.rate_limit else []
            keys += [g.rate_limit_per_key_key] if g.rate_limit_per_key else []
            settings = (
                f"{g.settings_namespace}: {', '.join(str(k) for k in keys)}"
                if g.settings_namespace
                else "-"
            )
            group_rows.append(
                (
                    g.group,
                    [
                        Text(g.group, style="bold"),
                        _usage(g.executing, g.global_limit),
                        Text(
                            "?" if g.per_key_limit is None else str(g.per_key_limit),
                            justify="right",
                        ),
                        _rate_usage(g.rate_used, g.rate_limit),
                        Text(g.rate_limit_per_key or "-", justify="right"),
                        Text(
                            count(g.waiting),
                            justify="right",
                            style="dark_orange" if g.waiting else "dim",
                        ),
                        settings,
                        Text(g.problem or "", style="bold red"),
                    ],
                )
            )
            for key in sorted(set(g.per_key) | set(g.rate_used_per_key)):
                key_rows.append(
                    (
                        f"{g.group}\x00{key}",
                        [
                            g.group,
                            key or "-",
                            _usage(g.per_key.get(key, 0), g.per_key_limit),
                            _rate_usage(g.rate_used_per_key.get(key, 0), g.rate_limit_per_key),
                        ],
                    )
                )
            for w in g.waiting_jobs:
                refused = not w.reason.startswith("eligible")
                waiting_rows.append(
                    (
                        str(w.job_id),
                        [
                            Ordered(Text(short_id(w.job_id), style="dim"), str(w.job_id)),
                            g.group,
                            w.concurrency_key or "-",
                            Text(w.reason, style="dark_orange" if refused else "green"),
                        ],
                    )
                )
        self.query_one("#groups", ViewTable).fill(group_rows)
        self.query_one("#keys", ViewTable).fill(key_rows)
        self.query_one("#waiting", ViewTable).fill(waiting_rows)
