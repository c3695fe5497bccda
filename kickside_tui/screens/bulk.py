"""Bulk retry, cancel and discard over the Jobs view's filter: choose, preview, confirm, apply.

``b`` opens :class:`BulkScreen`, a dialog in which the operator picks the action; it shows the
engine's preview (the count, the newest jobs, the completed jobs a retry leaves out) and applies
exactly the previewed jobs, never one that arrived after. Nothing in it is a default yes:

- with no filter the action would reach every job: a checkbox must say "all jobs";
- completed jobs are retried (run again) only with the "include completed" checkbox, off by
  default;
- the Apply button is the only way to go ahead, and for a large set (or every job) it stays
  disabled until the count is typed in.

No capital letter starts a bulk action (with Caps Lock on, ``c`` arrives as ``C``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

from kickside_engine.control import CONFIRM_BY_COUNT_ABOVE, BulkPreview, JobFilter
from kickside_tui.adapter import Adapter
from kickside_tui.screens.base import ActionFinished, ViewScreen, describe_failure
from kickside_tui.screens.job_filter import describe_filter
from kickside_tui.widgets.format import clock, count, short_id

ACTIONS = ("retry", "cancel", "discard")


@dataclass
class BulkPreviewed(Message):
    """The engine's preview for the dialog's choices (``preview`` None: ``note`` says why)."""

    generation: int
    preview: BulkPreview | None
    note: str = ""


@dataclass
class BulkProgressed(Message):
    """A bulk action committed another batch."""

    action: str
    done: int
    total: int


class BulkScreen(ModalScreen[BulkPreview | None]):
    """Choose a bulk action over ``flt`` and confirm its preview; dismisses with the preview
    to apply, or None."""

    DEFAULT_CSS = """
    BulkScreen {
        align: center middle;
    }
    BulkScreen > VerticalScroll {
        width: 80;
        max-width: 95%;
        height: auto;
        max-height: 95%;
        padding: 1 2;
        border: thick $error;
        background: $surface;
    }
    BulkScreen #bulk-filter, BulkScreen #bulk-preview {
        height: auto;
        margin-bottom: 1;
    }
    BulkScreen #bulk-preview {
        margin-top: 1;
    }
    BulkScreen RadioSet {
        layout: horizontal;
        width: auto;
    }
    BulkScreen RadioButton {
        margin-right: 2;
    }
    BulkScreen #bulk-typed {
        margin-bottom: 1;
    }
    BulkScreen Checkbox {
        width: auto;
    }
    BulkScreen #bulk-buttons {
        height: auto;
        align-horizontal: right;
    }
    BulkScreen Button {
        margin-left: 2;
    }
    """

    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, adapter: Adapter, flt: JobFilter, action: str | None = None) -> None:
        super().__init__()
        self.adapter = adapter
        self.flt = flt
        self.action = action if action in ACTIONS else None
        self.preview: BulkPreview | None = None
        self._generation = 0

    @property
    def unfiltered(self) -> bool:
        """True when the filter is empty: the action would reach every job."""
        return not self.flt.as_dict()

    def compose(self) -> ComposeResult:
        # Scrolls on a small terminal; the focused widget (the typed count) stays in view.
        with VerticalScroll():
            yield Static(Text("Bulk action over the Jobs filter", style="bold"))
            if self.unfiltered:
                what = Text("No filter: this would act on EVERY job.", style="bold red")
            else:
                what = Text(f"Filter: {describe_filter(self.flt)}")
            yield Static(what, id="bulk-filter")
            with RadioSet(id="bulk-action", compact=True):
                for name in ACTIONS:
                    yield RadioButton(
                        name, value=name == self.action, id=f"bulk-{name}", compact=True
                    )
            yield Checkbox("All jobs: act with no filter", id="bulk-all", value=False, compact=True)
            yield Checkbox(
                "Include completed jobs (a retry runs them again)",
                id="bulk-completed",
                value=False,
                compact=True,
            )
            yield Static(id="bulk-preview")
            yield Input(
                id="bulk-typed",
                placeholder="type the number of jobs to confirm",
                restrict=r"[0-9]*",
                compact=True,
            )
            with Horizontal(id="bulk-buttons"):
                yield Button("Close (esc)", id="bulk-close", compact=True)
                yield Button("Apply", id="bulk-apply", variant="error", disabled=True, compact=True)

    def on_mount(self) -> None:
        self.query_one("#bulk-all", Checkbox).display = self.unfiltered
        self.query_one("#bulk-typed", Input).display = False
        self.query_one(RadioSet).focus()
        self._refresh_preview()

    # --- choices -> preview ------------------------------------------------------------------

    @on(RadioSet.Changed, "#bulk-action")
    def _action_chosen(self, event: RadioSet.Changed) -> None:
        self.action = (event.pressed.id or "").removeprefix("bulk-")
        self._refresh_preview()

    @on(Checkbox.Changed)
    def _toggled(self, event: Checkbox.Changed) -> None:
        self._refresh_preview()

    def _refresh_preview(self) -> None:
        """Drop the shown preview (and any typed count) and ask the engine for a new one."""
        self._generation += 1
        self.preview = None
        typed = self.query_one("#bulk-typed", Input)
        typed.value = ""
        typed.display = False
        completed = self.query_one("#bulk-completed", Checkbox)
        completed.disabled = self.action != "retry"
        if self.action is None:
            self._show(Text("Choose an action above.", style="dim"))
            return
        if self.unfiltered and not self.query_one("#bulk-all", Checkbox).value:
            self._show(
                Text(
                    f'Bulk {self.action} with no filter needs "All jobs" ticked '
                    "(or set a filter first).",
                    style="bold",
                )
            )
            return
        self._show(Text("counting…", style="dim"))
        self._load_preview(
            self._generation, self.action, completed.value and not completed.disabled
        )

    @work(thread=True, exclusive=True, group="bulk-preview")
    def _load_preview(self, generation: int, action: str, include_completed: bool) -> None:
        try:
            preview = self.adapter.preview(
                action, self.flt, all_jobs=self.unfiltered, include_completed=include_completed
            )
        except Exception as exc:
            self.post_message(BulkPreviewed(generation, None, describe_failure(exc)))
        else:
            self.post_message(BulkPreviewed(generation, preview))

    def on_bulk_previewed(self, message: BulkPreviewed) -> None:
        message.stop()
        if message.generation != self._generation:
            return  # the answer to choices that have changed since
        preview = message.preview
        if preview is None:
            self._show(Text(f"cannot preview: {message.note}", style="bold red"))
            return
        self.preview = preview
        self._show(_describe(preview, self.flt))
        typed = self.query_one("#bulk-typed", Input)
        typed.display = preview.count > 0 and preview.needs_typed_count
        if typed.display:
            typed.placeholder = f"type {preview.count} to confirm"
            self.call_after_refresh(typed.focus)  # once laid out, so it scrolls into view

    def _show(self, text: Text) -> None:
        self.query_one("#bulk-preview", Static).update(text)
        self._update_apply()

    # --- confirmation -------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether Apply may go ahead: a preview with jobs, and the count typed when needed."""
        preview = self.preview
        if preview is None or preview.count == 0:
            return False
        if not preview.needs_typed_count:
            return True
        return self.query_one("#bulk-typed", Input).value.strip() == str(preview.count)

    def _update_apply(self) -> None:
        self.query_one("#bulk-apply", Button).disabled = not self.ready

    @on(Input.Changed, "#bulk-typed")
    def _typed(self, event: Input.Changed) -> None:
        self._update_apply()

    @on(Input.Submitted, "#bulk-typed")
    def _typed_and_entered(self, event: Input.Submitted) -> None:
        event.stop()
        if self.ready:
            self.dismiss(self.preview)
        else:
            self.notify("type the exact number of jobs to confirm", severity="warning")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "bulk-apply" and self.ready:
            self.dismiss(self.preview)
        elif event.button.id == "bulk-close":
            self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


def _describe(preview: BulkPreview, flt: JobFilter) -> Text:
    """The preview as the dialog shows it: what would change, what is left out, the newest."""
    text = Text()
    scope = "every job" if preview.all_jobs and not flt.as_dict() else describe_filter(flt)
    text.append(
        f"Bulk {preview.action} {count(preview.count)} job(s) matching {scope}", style="bold"
    )
    text.append(f"\nas of {clock(preview.taken_at)}; a job arriving later is never touched")
    if preview.completed_excluded:
        text.append(
            f"\n{count(preview.completed_excluded)} completed job(s) left out "
            '("Include completed" runs them again)',
            style="yellow",
        )
    if preview.count == 0:
        text.append("\nnothing to do", style="dim")
        return text
    text.append("\nnewest:")
    for job in preview.sample:
        text.append(f"\n  {short_id(job.id)} {job.worker} {job.state.value}")
    if preview.needs_typed_count:
        why = "every job" if preview.all_jobs else f"more than {CONFIRM_BY_COUNT_ABOVE} jobs"
        text.append(f"\n{why}: type {preview.count} below, then Enter", style="bold")
    else:
        text.append("\npress Apply to go ahead", style="bold")
    return text


class BulkActions(ViewScreen):
    """A view with a job filter (``flt``) that bulk actions apply to, in audited batches."""

    flt: JobFilter
    bulk_note: str

    def _show_status(self) -> None:
        """Show :attr:`bulk_note` (the view's status line)."""

    def action_bulk(self, action: str | None = None) -> None:
        if self.adapter.read_only:
            self.notify("read-only dashboard: bulk actions are disabled", severity="warning")
            return

        def decided(preview: BulkPreview | None) -> None:
            if preview is not None:
                self.bulk_note = f"bulk {preview.action}: starting"
                self._show_status()
                self._bulk_apply(preview)

        self.app.push_screen(BulkScreen(self.adapter, self.flt, action), decided)

    def action_capital(self, key: str) -> None:
        """A capital letter does nothing here: the operator may have Caps Lock on."""
        self.notify(
            f"{key} does nothing here (Caps Lock on?): actions use lower-case keys; bulk "
            "actions are under b and always ask first",
            severity="warning",
        )

    @work(thread=True, group="action")
    def _bulk_apply(self, preview: BulkPreview) -> None:
        action = preview.action

        def progress(done: int, total: int) -> None:
            self.post_message(BulkProgressed(action, done, total))

        try:
            result = self.adapter.bulk(preview, self.adapter.now(), on_progress=progress)
        except Exception as exc:
            self.post_message(ActionFinished(f"bulk {action}: {describe_failure(exc)}", False))
        else:
            self.post_message(ActionFinished(result.summary(), ok=True))

    def on_bulk_progressed(self, message: BulkProgressed) -> None:
        message.stop()
        self.bulk_note = f"bulk {message.action}: {message.done}/{message.total}"
        self._show_status()
