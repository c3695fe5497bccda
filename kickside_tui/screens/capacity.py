"""Capacity groups: limits from Settings, usage now, per-key usage and refused admissions."""

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
    Col("waiting", "waiting"),
    Col("settings", "settings", drop=2, flex=True),
    Col("problem", "problem", drop=1, flex=True),
)
KEYS = (
    Col("group", "group"),
    Col("concurrency key", "concurrency key", "key"),
    Col("executing", "executing", "exec"),
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
            settings = (
                f"{g.settings_namespace}: {g.global_limit_key}, {g.concurrency_key_limit_key}"
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
            for key, used in sorted(g.per_key.items()):
                key_rows.append(
                    (f"{g.group}\x00{key}", [g.group, key or "-", _usage(used, g.per_key_limit)])
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
