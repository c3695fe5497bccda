"""Slots: slot jobs by identity with state, pending wakes, last run and next due time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from kickside_engine.slots import SlotInfo
from kickside_tui.screens.base import ViewScreen
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.screens.purge import PurgeScreen
from kickside_tui.widgets.format import clock, count, outcome_text, relative, state_text
from kickside_tui.widgets.tables import Row, refill, selected_key


def _flag(on: bool, label: str) -> Text:
    return Text(label, style="bold") if on else Text("-", style="dim")


class SlotsScreen(ViewScreen):
    """Wake (ensure due), park, resume (enable) and purge slots."""

    VIEW = "slots"
    WRITE_ACTIONS = frozenset({"wake", "park", "enable", "purge"})
    BINDINGS = [
        Binding("w", "wake", "Wake"),
        Binding("k", "park", "Park"),
        Binding("e", "enable", "Resume"),
        Binding("x", "purge", "Purge"),
    ]

    def __init__(self, adapter: Any) -> None:
        super().__init__(adapter)
        self.slots: dict[str, SlotInfo] = {}

    def compose_body(self) -> ComposeResult:
        yield Static(id="status", classes="status")
        table: DataTable[Any] = DataTable(id="slots", cursor_type="row", zebra_stripes=True)
        for column in ("namespace", "scope", "key", "state", "demand", "control", "seq",
                       "last run", "outcome", "next due", "worker"):
            table.add_column(column, key=column)
        yield table

    def on_mount(self) -> None:
        self.query_one("#slots", DataTable).focus()

    def fetch(self, now: datetime) -> list[SlotInfo]:
        return self.adapter.slots(now)

    def show(self, data: Any, now: datetime) -> None:
        slots: list[SlotInfo] = data
        self.slots = {str(s.job_id): s for s in slots}
        rows: list[Row] = []
        for s in slots:
            state = state_text(s.state)
            if s.purge is not None:
                state.append(" purging", style="bold red")
            elif s.due:
                state.append(" due", style="bold")
            rows.append((
                str(s.job_id),
                [
                    s.namespace,
                    s.scope,
                    Text(s.key, style="bold"),
                    state,
                    _flag(s.demand_pending, "demand"),
                    _flag(s.control_pending, "wake"),
                    Text(str(s.demand_seq), justify="right"),
                    relative(s.last_started_at, now) if s.last_started_at else "never",
                    outcome_text(s.last_outcome) if s.last_started_at else Text("-", style="dim"),
                    f"{clock(s.next_due_at)} ({relative(s.next_due_at, now)})"
                    if s.next_due_at else "-",
                    s.worker,
                ],
            ))
        refill(self.query_one("#slots", DataTable), rows)
        due = sum(1 for s in slots if s.due)
        status = Text(f"{count(len(slots))} slot(s) · {due} due · ", style="dim")
        purging = [s for s in slots if s.purge is not None]
        if purging:
            # A purge stopped early stays pending: say so until it is done.
            status.append(f"{len(purging)} purge(s) pending (x finishes) · ", style="bold red")
        status.append("w wake (ensure due) · k park · e resume a disabled slot · x purge")
        self.query_one("#status", Static).update(status)

    def _selected(self) -> SlotInfo | None:
        key = selected_key(self.query_one("#slots", DataTable))
        slot = self.slots.get(key) if key else None
        if slot is None:
            self.notify("select a slot first", severity="warning")
        return slot

    def action_wake(self) -> None:
        if (slot := self._selected()) is not None:
            self.act("wake", lambda now: self.adapter.wake(slot.job_id, now))

    def action_park(self) -> None:
        if (slot := self._selected()) is not None:
            self.act(
                "park",
                lambda now: f"slot {slot.key} {self.adapter.park(slot.job_id, now).state.value}",
                confirm=f"Park slot {slot.namespace}/{slot.scope}/{slot.key}?\n"
                "Its pending demand and control wakes are cleared.",
            )

    def action_enable(self) -> None:
        if (slot := self._selected()) is not None:
            self.act(
                "resume",
                lambda now: f"slot {slot.key} {self.adapter.enable(slot.job_id, now).state.value}",
            )

    def action_purge(self) -> None:
        slot = self._selected()
        if slot is None:
            return
        if self.adapter.read_only:
            self.notify("read-only dashboard: purge is disabled", severity="warning")
            return
        question = (
            f"Purge slot {slot.namespace}/{slot.scope}/{slot.key}?\n"
            "Its pending wakes are cleared at once and it runs no more. The slot and its "
            "settled run history are deleted, a page at a time; a running slot is purged once "
            "its run ends. Stopped early, the purge stays pending until purged again."
        )

        def purged(removed: bool | None) -> None:
            if removed:
                self.notify(f"slot {slot.key} purged")
            self.reload()

        def decided(answer: bool | None) -> None:
            if answer:
                self.app.push_screen(PurgeScreen(self.adapter, slot), purged)

        self.app.push_screen(ConfirmScreen(question, verb="Purge"), decided)

