"""Bulk retry, cancel and discard over the Jobs view's filter: dry-run count, confirm, apply."""

from __future__ import annotations

from dataclasses import dataclass

from textual import work
from textual.message import Message

from kickside_engine.control import BulkPreview, JobFilter
from kickside_tui.screens.base import ActionFinished, ViewScreen, describe_failure
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.screens.job_filter import describe_filter
from kickside_tui.widgets.format import count, short_id


@dataclass
class BulkPreviewed(Message):
    """The dry run of a bulk action: how many jobs it would change."""

    action: str
    flt: JobFilter
    preview: BulkPreview


@dataclass
class BulkProgressed(Message):
    """A bulk action committed another batch."""

    action: str
    done: int
    total: int


class BulkActions(ViewScreen):
    """A view with a job filter (``flt``) that bulk actions apply to, in audited batches."""

    flt: JobFilter
    bulk_note: str

    def _show_status(self) -> None:
        """Show :attr:`bulk_note` (the view's status line)."""

    def action_bulk(self, action: str) -> None:
        if self.adapter.read_only:
            self.notify(f"read-only dashboard: bulk {action} is disabled", severity="warning")
            return
        self._preview(action, self.flt)

    @work(thread=True, exclusive=True, group="preview")
    def _preview(self, action: str, flt: JobFilter) -> None:
        try:
            preview = self.adapter.preview(action, flt)
        except Exception as exc:
            self.post_message(ActionFinished(f"bulk {action}: {describe_failure(exc)}", False))
        else:
            self.post_message(BulkPreviewed(action, flt, preview))

    def on_bulk_previewed(self, message: BulkPreviewed) -> None:
        message.stop()
        action, flt, preview = message.action, message.flt, message.preview
        if preview.count == 0:
            self.notify(f"bulk {action}: no job matching {describe_filter(flt)} qualifies")
            return
        sample = "\n".join(
            f"  {short_id(j.id)} {j.worker} {j.state.value}" for j in preview.sample
        )
        question = (
            f"Bulk {action} {count(preview.count)} job(s) matching {describe_filter(flt)}?\n"
            f"(dry run count; jobs that change meanwhile are skipped)\n{sample}"
        )

        def decided(answer: bool | None) -> None:
            if answer:
                self.bulk_note = f"bulk {action}: starting"
                self._show_status()
                self._bulk_apply(action, flt)

        self.app.push_screen(ConfirmScreen(question, verb=f"Bulk {action}"), decided)

    @work(thread=True, group="action")
    def _bulk_apply(self, action: str, flt: JobFilter) -> None:
        def progress(done: int, total: int) -> None:
            self.post_message(BulkProgressed(action, done, total))

        try:
            result = self.adapter.bulk(action, flt, self.adapter.now(), on_progress=progress)
        except Exception as exc:
            self.post_message(ActionFinished(f"bulk {action}: {describe_failure(exc)}", False))
        else:
            self.post_message(ActionFinished(
                f"bulk {action}: {result.changed} changed, {result.skipped} skipped "
                f"of {result.matched} matched", ok=True,
            ))

    def on_bulk_progressed(self, message: BulkProgressed) -> None:
        message.stop()
        self.bulk_note = f"bulk {message.action}: {message.done}/{message.total}"
        self._show_status()

