"""The Jobs view's status line: page, matches, filter, search progress and what keys do next."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.text import Text

from kickside_tui.adapter import COUNT_LIMIT
from kickside_tui.widgets.format import clock, count, stamp


@dataclass(frozen=True)
class JobsStatus:
    """What the status line reports; ``searching`` is set while a search is still reading."""

    page: int
    shown: int
    total: int | None
    filter_text: str
    has_older: bool
    has_newer: bool
    search: bool = False
    #: (matches so far, searched back to) while a search reads the table window by window.
    searching: tuple[int, datetime | None] | None = None
    #: When a finished search was stopped before its page was full: how far back it read.
    stopped_at: datetime | None = None
    #: When a search that needed several windows ran (it is not refreshed on its own).
    searched_at: datetime | None = None
    note: str = ""


def render_status(status: JobsStatus) -> Text:
    """The status line for ``status``."""
    text = Text()
    text.append(f"page {status.page}", style="bold")
    if status.searching is not None:
        found, back_to = status.searching
        text.append(" · searching\u2026", style="bold yellow")
        text.append(f" {count(found)} found so far")
        if back_to is not None:
            text.append(f", back to {stamp(back_to)}")
        text.append(" · esc: stop", style="dim")
    else:
        text.append(f" · {count(status.shown)} shown")
        if status.total is not None:
            shown = f"{count(COUNT_LIMIT)}+" if status.total > COUNT_LIMIT else count(status.total)
            text.append(f" · {shown} match")
        if status.search and not status.has_older and status.stopped_at is None:
            text.append(" · searched every job")
        if status.stopped_at is not None:
            text.append(f" · stopped at {stamp(status.stopped_at)}", style="yellow")
    text.append(f" · {status.filter_text}", style="italic")
    if status.searching is None:
        if status.has_older:
            text.append(
                " · n: older" if status.stopped_at is None else " · n: search older", style="dim"
            )
        if status.has_newer:
            text.append(" · p: newer", style="dim")
        if status.searched_at is not None:
            text.append(f" · as of {clock(status.searched_at)}Z, g: search again", style="dim")
    if status.note:
        text.append(f" · {status.note}", style="bold yellow")
    return text
