"""One queue's throughput as two sparklines: completed and failed runs per minute."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static


class QueueSparks(Horizontal):
    """``queue  ▁▂▅█ completed 42  ▁▁▂ failed 3``, all on one line."""

    DEFAULT_CSS = """
    QueueSparks {
        height: 1;
    }
    QueueSparks > .queue-name {
        width: 16;
        text-style: bold;
    }
    QueueSparks > Sparkline {
        width: 1fr;
        max-width: 40;
    }
    QueueSparks > .spark-total {
        width: 16;
        padding-left: 1;
    }
    QueueSparks > .spark-bad > .sparkline--max-color {
        color: $error;
    }
    QueueSparks > .spark-bad > .sparkline--min-color {
        color: $error 30%;
    }
    QueueSparks > .spark-ok > .sparkline--max-color {
        color: $success;
    }
    QueueSparks > .spark-ok > .sparkline--min-color {
        color: $success 30%;
    }
    """

    def __init__(self, queue: str, completed: Sequence[float], failed: Sequence[float]) -> None:
        super().__init__()
        self.queue = queue
        self.completed = list(completed)
        self.failed = list(failed)

    def compose(self) -> ComposeResult:
        yield Static(self.queue, classes="queue-name", markup=False)
        yield Sparkline(self.completed, classes="spark-ok")
        yield Static(f"{sum(self.completed):.0f} completed", classes="spark-total ok-total")
        yield Sparkline(self.failed, classes="spark-bad")
        yield Static(f"{sum(self.failed):.0f} failed", classes="spark-total bad-total")

    def set_data(self, completed: Sequence[float], failed: Sequence[float]) -> None:
        """Show the per-minute counts (oldest first)."""
        self.completed, self.failed = list(completed), list(failed)
        ok, bad = self.query(Sparkline)
        ok.data = list(completed)
        bad.data = list(failed)
        self.query_one(".ok-total", Static).update(f"{sum(completed):.0f} completed")
        self.query_one(".bad-total", Static).update(f"{sum(failed):.0f} failed")
