"""The actions on one job, shared by the Jobs view and the job screen a row opens."""

from __future__ import annotations

from textual.binding import Binding

from kickside_engine import Job, JobKind, JobState
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.format import short_id

#: The keys of :class:`JobActions`, for the ``BINDINGS`` of the screens that have them.
JOB_ACTION_BINDINGS = (
    Binding("r", "retry", "Retry"),
    Binding("c", "cancel", "Cancel"),
    Binding("d", "discard", "Discard"),
    Binding("w", "wake", "Wake"),
    Binding("a", "park", "Park"),
    Binding("e", "enable", "Resume"),
)
#: The actions of :class:`JobActions`, all of which write (for ``WRITE_ACTIONS``).
JOB_WRITE_ACTIONS = frozenset({"retry", "cancel", "discard", "wake", "park", "enable"})


class JobActions(ViewScreen):
    """Retry, cancel, discard, wake, park and resume the job :meth:`_selected` returns."""

    def _selected(self) -> Job | None:
        """The job to act on, or None after saying why there is none."""
        raise NotImplementedError

    def action_retry(self) -> None:
        if (job := self._selected()) is not None:
            self.act("retry", lambda now: _moved(self.adapter.retry(job.id, now), "retried"))

    def action_cancel(self) -> None:
        if (job := self._selected()) is not None:
            self.act(
                "cancel",
                lambda now: _moved(self.adapter.cancel(job.id, now), "cancelled"),
                confirm=f"Cancel job {job.id}?\n{job.worker} on {job.queue}, "
                f"now {job.state.value}.",
            )

    def action_discard(self) -> None:
        if (job := self._selected()) is not None:
            self.act(
                "discard",
                lambda now: _moved(self.adapter.discard(job.id, now), "discarded"),
                confirm=f"Discard job {job.id}?\n{job.worker} on {job.queue}, "
                f"now {job.state.value}.",
            )

    def action_wake(self) -> None:
        if (job := self._selected()) is not None:
            self.act("wake", lambda now: self.adapter.wake(job.id, now))

    def action_park(self) -> None:
        if (job := self._selected()) is not None:
            self.act(
                "park",
                lambda now: _moved(self.adapter.park(job.id, now), "parked"),
                confirm=f"Park slot job {job.id}?\nIts pending demand and wakes are cleared.",
            )

    def action_enable(self) -> None:
        """Resume a disabled slot (as on the Slots view): due now with a wake pending, else
        parked. Any other job has nothing to resume, so the engine is not asked."""
        if (job := self._selected()) is None:
            return
        if job.state is not JobState.DISABLED:
            what = "slot" if job.kind is JobKind.SLOT else "one-shot job"
            self.notify(
                f"job {short_id(job.id)} is a {job.state.value} {what}: only a "
                "disabled slot can be resumed",
                severity="warning",
            )
            return
        self.act("resume", lambda now: _moved(self.adapter.enable(job.id, now), "resumed"))


def _moved(job: Job, verb: str) -> str:
    return f"job {short_id(job.id)} {verb}: now {job.state.value}"
