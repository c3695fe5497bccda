"""Series over time as one-line bar plots: a row per series, its label, and a figure beside it.

Bars start at zero and scale to the row's largest value: ``▁`` is zero, ``▂`` to ``█`` are
sevenths of the largest value, and ``·`` marks a step where nothing was measured (no run
finished, no job waited). A series longer than the room is cut into equal groups of steps
(the oldest group may be short), each shown by its largest value; then the steps or groups are
widened to fill the row, one column more for some than for others. Every row names what it
plots and says how much beside it, so the plot reads without colour; colour only repeats it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

ZERO = "\u2581"
BARS = "\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
GAP = "\u00b7"
TONES = ("ok", "bad", "time", "age")


@dataclass(frozen=True)
class Series:
    """One row: what it plots, its values oldest first (None: nothing measured), and the figure
    shown beside it. ``tone`` picks the colour: ``ok``, ``bad``, ``time`` or ``age``."""

    label: str
    values: tuple[float | None, ...]
    figure: str
    tone: str = "ok"


def resample(values: Sequence[float | None], width: int) -> list[float | None]:
    """``values`` fitted into exactly ``width`` columns, oldest first."""
    n = len(values)
    if not n or width < 1:
        return []
    if n > width:
        step = -(-n // width)
        cut = n % step  # the oldest group is the short one, so the newest is whole
        groups = [values[:cut]] if cut else []
        groups += [values[i : i + step] for i in range(cut, n, step)]
        values = [max((v for v in g if v is not None), default=None) for g in groups]
        n = len(values)
    return [values[c * n // width] for c in range(width)]


def bars(values: Sequence[float | None], width: int) -> str:
    """``values`` as ``width`` columns of bars (nothing without values)."""
    shown = resample(values, width)
    top = max((v for v in shown if v is not None), default=0.0)

    def bar(v: float | None) -> str:
        if v is None:
            return GAP
        if v <= 0 or top <= 0:
            return ZERO
        return BARS[min(len(BARS), math.ceil(v / top * len(BARS))) - 1]

    return "".join(bar(v) for v in shown).ljust(width)


class SeriesPlot(Widget):
    """A block of :class:`Series` rows; ``title`` (a queue) heads its first row."""

    COMPONENT_CLASSES = {
        "series-plot--title",
        "series-plot--label",
        "series-plot--figure",
        *(f"series-plot--{tone}" for tone in TONES),
    }
    DEFAULT_CSS = """
    SeriesPlot {
        height: auto;
    }
    SeriesPlot > .series-plot--title {
        text-style: bold;
    }
    SeriesPlot > .series-plot--label {
        color: $text-muted;
    }
    SeriesPlot > .series-plot--ok {
        color: $success;
    }
    SeriesPlot > .series-plot--bad {
        color: $error;
    }
    SeriesPlot > .series-plot--time {
        color: $primary-lighten-1;
    }
    SeriesPlot > .series-plot--age {
        color: $warning;
    }
    """

    def __init__(
        self,
        title: str = "",
        series: Sequence[Series] = (),
        *,
        title_width: int = 12,
        label_width: int = 11,
        figure_width: int = 14,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.series = list(series)
        self.title_width = title_width
        self.label_width = label_width
        self.figure_width = figure_width

    def set_series(self, series: Sequence[Series]) -> None:
        """Show ``series`` (one row each) instead."""
        resize = len(series) != len(self.series)
        self.series = list(series)
        self.refresh(layout=resize)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.series)

    def bar_width(self, width: int | None = None) -> int:
        """Columns left for the bars in a row ``width`` wide (the widget's own by default)."""
        total = self.content_size.width if width is None else width
        fixed = self.title_width + self.label_width + self.figure_width
        gaps = sum(1 for w in (self.title_width, self.label_width, self.figure_width) if w)
        return max(0, total - fixed - gaps)

    def lines(self, width: int | None = None) -> list[str]:
        """The rows as plain text (what the widget shows, without colour)."""
        return [line.plain for line in self._rows(width, styled=False)]

    def render(self) -> Text:
        return Text("\n").join(self._rows(None, styled=True))

    def _rows(self, width: int | None, *, styled: bool) -> list[Text]:
        def style(part: str) -> Style:
            return self.get_component_rich_style(f"series-plot--{part}") if styled else Style()

        room = self.bar_width(width)
        rows = []
        for i, s in enumerate(self.series):
            row = Text(no_wrap=True, overflow="ellipsis")
            if self.title_width:
                title = self.title if i == 0 else ""
                if len(title) > self.title_width:
                    title = title[: self.title_width - 1] + "\u2026"
                row.append(title.ljust(self.title_width) + " ", style("title"))
            if self.label_width:
                row.append(
                    s.label[: self.label_width].ljust(self.label_width) + " ", style("label")
                )
            row.append(bars(s.values, room), style(s.tone if s.tone in TONES else "ok"))
            if self.figure_width:
                row.append(
                    " " + s.figure[: self.figure_width].rjust(self.figure_width), style("figure")
                )
            rows.append(row)
        return rows
