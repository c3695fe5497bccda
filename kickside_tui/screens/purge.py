"""Purging a slot, page by page, showing the continuation as it proceeds.

The engine deletes at most a page of settled runs per call and says how to continue: call again
at once, or wait for the lease to be released or the history to settle. This dialog has the
engine keep calling (waiting between calls while the slot runs) until the slot is gone or the
operator stops it; the whole purge leaves one audit row with its outcome. The first call clears
the slot's wakes, so it runs no more, and a purge stopped early stays pending (the Slots view
shows it) until purged again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from kickside_engine.control import PurgeProgress, SlotInfo
from kickside_tui.adapter import Adapter


@dataclass
class PurgeProgressed(Message):
    """One purge call returned (``step`` adds up every call so far)."""

    step: PurgeProgress


@dataclass
class PurgeFailed(Message):
    """A purge call failed outright."""

    message: str


class PurgeScreen(ModalScreen[bool]):
    """Runs a slot purge to its end; dismisses with True when the slot was removed."""

    DEFAULT_CSS = """
    PurgeScreen {
        align: center middle;
    }
    PurgeScreen > Vertical {
        width: 70;
        max-width: 95%;
        height: auto;
        padding: 1 2;
        border: thick $error;
        background: $surface;
    }
    PurgeScreen #progress {
        height: auto;
        margin: 1 0;
    }
    """

    BINDINGS = [Binding("escape", "close", "Stop / close")]

    def __init__(self, adapter: Adapter, slot: SlotInfo) -> None:
        super().__init__()
        self.adapter = adapter
        self.slot = slot
        self.deleted = 0
        self.calls = 0
        self.removed = False
        self.finished = False
        self.state = "starting"
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text(
                    f"Purging slot {self.slot.namespace}/{self.slot.scope}/{self.slot.key}",
                    style="bold",
                )
            )
            yield Static(id="progress")
            yield Button("Stop", id="close", variant="warning")

    def on_mount(self) -> None:
        self._render_progress()
        self._run()

    def on_unmount(self) -> None:
        self._stop.set()  # the worker thread must not outlive the dialog

    @work(thread=True, exclusive=True, group="purge")
    def _run(self) -> None:
        try:
            self.adapter.purge(
                self.slot,
                wait=self._stop.wait,  # True once the dialog closes: the purge stops
                on_progress=self._progressed,
            )
        except Exception as exc:  # reported in the dialog, never fatal
            self.post_message(PurgeFailed(str(exc).splitlines()[0] if str(exc) else repr(exc)))

    def _progressed(self, step: PurgeProgress) -> None:
        self.post_message(PurgeProgressed(step))

    def on_purge_progressed(self, message: PurgeProgressed) -> None:
        step = message.step
        self.calls = step.calls
        self.deleted = step.runs_deleted
        if step.removed:
            self.state, self.removed, self.finished = "removed", True, True
        elif step.absent:
            self.state, self.finished = "already gone", True
        elif step.needs_continue:
            self.state = "deleting settled runs"
        elif step.wait_for == "lease_release":
            self.state = (
                "waiting for lease release (the slot is running; its wakes are "
                "cleared, so it runs no more)"
            )
        elif step.wait_for:
            self.state = f"waiting for {step.wait_for.replace('_', ' ')}"
        self._render_progress()

    def on_purge_failed(self, message: PurgeFailed) -> None:
        self.state, self.finished = f"failed: {message.message}", True
        self._render_progress()

    def _render_progress(self) -> None:
        text = Text()
        text.append(f"runs deleted: {self.deleted}\n")
        text.append(f"calls: {self.calls}\n")
        style = "bold green" if self.removed else "bold red" if "failed" in self.state else ""
        text.append(f"status: {self.state}", style=style)
        self.query_one("#progress", Static).update(text)
        if self.finished:
            self.query_one("#close", Button).label = "Close"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_close()

    def action_close(self) -> None:
        self._stop.set()
        self.dismiss(self.removed)
