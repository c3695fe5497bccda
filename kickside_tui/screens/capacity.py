"""Capacity groups: limits from Settings, usage now, per-key usage and refused admissions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from kickside_engine.capacity import CapacityGroupInfo
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.format import count, short_id
from kickside_tui.widgets.tables import Row, refill


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
            groups: DataTable[Any] = DataTable(id="groups", cursor_type="row", zebra_stripes=True)
            for column in ("group", "global", "per key limit", "waiting", "settings", "problem"):
                groups.add_column(column, key=column)
            yield groups
            yield Static("Per concurrency key", classes="section")
            keys: DataTable[Any] = DataTable(id="keys", cursor_type="row", zebra_stripes=True)
            for column in ("group", "concurrency key", "executing"):
                keys.add_column(column, key=column)
            yield keys
            yield Static("Refused admission (due, not admitted now)", classes="section")
            waiting: DataTable[Any] = DataTable(id="waiting", cursor_type="row",
                                                zebra_stripes=True)
            for column in ("job", "group", "concurrency key", "reason"):
                waiting.add_column(column, key=column)
            yield waiting

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
                if g.settings_namespace else "-"
            )
            group_rows.append((
                g.group,
                [
                    Text(g.group, style="bold"),
                    _usage(g.executing, g.global_limit),
                    Text("?" if g.per_key_limit is None else str(g.per_key_limit),
                         justify="right"),
                    Text(count(g.waiting), justify="right",
                         style="dark_orange" if g.waiting else "dim"),
                    settings,
                    Text(g.problem or "", style="bold red"),
                ],
            ))
            for key, used in sorted(g.per_key.items()):
                key_rows.append((f"{g.group}\x00{key}",
                                 [g.group, key or "-", _usage(used, g.per_key_limit)]))
            for w in g.waiting_jobs:
                refused = not w.reason.startswith("eligible")
                waiting_rows.append((
                    str(w.job_id),
                    [Text(short_id(w.job_id), style="dim"), g.group, w.concurrency_key or "-",
                     Text(w.reason, style="dark_orange" if refused else "green")],
                ))
        refill(self.query_one("#groups", DataTable), group_rows)
        refill(self.query_one("#keys", DataTable), key_rows)
        refill(self.query_one("#waiting", DataTable), waiting_rows)
