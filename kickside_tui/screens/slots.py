"""Slots: slot jobs by identity with state, pending wakes, last run and next due time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from kickside_engine.control import SlotInfo
from kickside_tui.screens.base import ViewScreen
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.screens.purge import PurgeScreen
from kickside_tui.widgets.format import clock, count, outcome_text, relative, state_text
from kickside_tui.widgets.tables import Row, selected_key
from kickside_tui.widgets.view_table import Col, Ordered, ViewTable, job_key

#: The columns: the slot's identity and state stay on a narrow terminal.
COLUMNS = (
    Col("namespace", "namespace", "ns"),
    Col("scope", "scope"),
    Col("key", "key"),
    Col("state", "state"),
    Col("demand", "demand", drop=1),
    Col("control", "control", "wake", drop=1),
    Col("seq", "seq", drop=3),
    Col("last run", "last run", "last", drop=2),
    Col("outcome", "outcome", drop=2),
    Col("next due", "next due", "due", drop=2),
    Col("worker", "worker", drop=3),
)


def _flag(on: bool, label: str) -> Text:
    return Text(label, style="bold") if on else Text("-", style="dim")


class SlotsScreen(ViewScreen):
    """Wake (ensure due), park, resume (enable) and purge slots."""

    VIEW = "slots"
    WRITE_ACTIONS = frozenset({"wake", "park", "enable", "purge"})
    BINDINGS = [
        Binding("w", "wake", "Wake"),
        Binding("a", "park", "Park"),
        Binding("e", "enable", "Resume"),
        Binding("x", "purge", "Purge"),
    ]

    def __init__(self, adapter: Any) -> None:
        super().__init__(adapter)
        self.slots: dict[str, SlotInfo] = {}

    def compose_body(self) -> ComposeResult:
        yield Static(id="status", classes="status")
        yield ViewTable(COLUMNS, id="slots", copy_what="job id", job_of=job_key)

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
            rows.append(
                (
                    str(s.job_id),
                    [
                        s.namespace,
                        s.scope,
                        Text(s.key, style="bold"),
                        state,
                        _flag(s.demand_pending, "demand"),
                        _flag(s.control_pending, "wake"),
                        Text(str(s.demand_seq), justify="right"),
                        Ordered(
                            relative(s.last_started_at, now) if s.last_started_at else "never",
                            s.last_started_at,
                        ),
                        outcome_text(s.last_outcome)
                        if s.last_started_at
                        else Text("-", style="dim"),
                        Ordered(
                            f"{clock(s.next_due_at)} ({relative(s.next_due_at, now)})"
                            if s.next_due_at
                            else "-",
                            s.next_due_at,
                        ),
                        s.worker,
                    ],
                )
            )
        self.query_one("#slots", ViewTable).fill(rows)
        due = sum(1 for s in slots if s.due)
        status = Text(f"{count(len(slots))} slot(s) · {due} due · ", style="dim")
        purging = [s for s in slots if s.purge is not None]
        if purging:
            # A purge stopped early stays pending: say so until it is done.
            status.append(f"{len(purging)} purge(s) pending (x finishes) · ", style="bold red")
        status.append(
            "enter opens the job · w wake (ensure due) · a park · e resume a disabled "
            "slot · x purge"
        )
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
