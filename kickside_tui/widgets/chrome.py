"""The frame around every view: the view bar and the database-trouble banner."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

#: The views in key order: (mode name, key, label).
VIEWS: tuple[tuple[str, str, str], ...] = (
    ("overview", "1", "Overview"),
    ("jobs", "2", "Jobs"),
    ("slots", "3", "Slots"),
    ("leases", "4", "Leases"),
    ("capacity", "5", "Capacity"),
    ("metrics", "6", "Metrics & health"),
    ("ops", "7", "Queues/nodes/cron"),
)
#: Shorter labels for narrow terminals.
SHORT_LABELS = {"metrics": "Metrics", "ops": "Queues"}


class ViewBar(Widget):
    """One line naming every view and its key, the current one highlighted."""

    DEFAULT_CSS = """
    ViewBar {
        height: 1;
        background: $panel;
        color: $text-muted;
    }
    """

    def __init__(self, current: str, *, read_only: bool) -> None:
        super().__init__()
        self.current = current
        self.read_only = read_only

    def render(self) -> Text:
        for short in (False, True):
            text = Text(no_wrap=True, overflow="ellipsis")
            if self.read_only:
                text.append(" READ-ONLY ", style="bold black on yellow")
            for name, key, label in VIEWS:
                style = "bold reverse" if name == self.current else ""
                label = SHORT_LABELS.get(name, label) if short else label
                text.append(f" {key} {label} ", style=style)
            if text.cell_len <= self.size.width:
                break
        return text


class Banner(Static):
    """A visible warning (the database is unreachable); hidden while all is well."""

    DEFAULT_CSS = """
    Banner {
        display: none;
        height: auto;
        padding: 0 1;
        background: $error;
        color: $text;
        text-style: bold;
    }
    Banner.-shown {
        display: block;
    }
    """

    def show_problem(self, message: str | None) -> None:
        """Show ``message``, or hide the banner when it is None."""
        if message is None:
            self.remove_class("-shown")
            self.update("")
        else:
            self.update(Text(message))
            self.add_class("-shown")

    @property
    def shown(self) -> bool:
        return self.has_class("-shown")
