"""The plots of the Overview and Metrics views: what they are fed, and how bars are drawn."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from kickside_engine import Database, JobBuilder, enqueue
from kickside_tui.screens.metrics import MetricsScreen
from kickside_tui.widgets.sparks import GAP, ZERO, SeriesPlot, bars, resample

from .fixtures import NOW, build_demo_data, demo_adapter_kwargs, make_app, settle

N = None
#: The demo's mail: one run every 73 s from 14:05 - 1750 s; the buckets are the minutes 13:36
#: to 14:05 (the last one begins at NOW). Every mail waited 2 s; 3 in 7 failed (i % 7 == 3).
MAIL_COMPLETED = [
    0,
    1,
    1,
    0,
    1,
    1,
    0,
    1,
    1,
    1,
    1,
    0,
    0,
    1,
    1,
    1,
    1,
    0,
    1,
    1,
    0,
    1,
    1,
    0,
    1,
    1,
    1,
    1,
    0,
    0,
]
MAIL_FAILED = [1 if i in (3, 12, 20) else 0 for i in range(30)]
MAIL_RAN = [
    N,
    217,
    254,
    291,
    328,
    365,
    N,
    402,
    439,
    476,
    513,
    N,
    550,
    187,
    224,
    261,
    298,
    N,
    335,
    372,
    409,
    446,
    483,
    N,
    520,
    557,
    194,
    231,
    N,
    N,
]
#: default's oldest waiting job: the cron entry due at 14:00:20, still available at NOW; before
#: it, the invoices' and the card's 2 s waits and the retry's 10 s.
DEFAULT_AGE = [N] * 8 + [
    2.0,
    2.0,
    N,
    N,
    N,
    2.0,
    2.0,
    N,
    N,
    N,
    N,
    10.0,
    N,
    N,
    N,
    N,
    40.0,
    100.0,
    160.0,
    220.0,
    280.0,
    280.0,
]


def test_bars_start_at_zero_and_mark_missing_steps() -> None:
    assert bars([0, 1, 7, None], 4) == f"{ZERO}\u2582\u2588{GAP}"
    assert bars([0, 0], 2) == ZERO * 2
    assert bars([None], 3) == GAP * 3
    assert bars([], 3) == "   "


def test_resample_keeps_the_newest_group_whole_and_fills_the_row() -> None:
    # Seven steps in three columns: groups of three, each shown by its largest value, the
    # oldest one short; a group with nothing measured stays a gap.
    assert resample([1, 9, 2, 3, 4, None, None], 3) == [1, 9, 4]
    assert resample([1, 2, 3, None, None, None], 2) == [3, None]
    # Two steps widened to five columns.
    assert resample([1, 2], 5) == [1, 1, 1, 2, 2]


def _series(plot: SeriesPlot) -> dict[str, tuple[tuple[float | None, ...], str]]:
    return {s.label: (s.values, s.figure) for s in plot.series}


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_views_plot_rates_latency_and_backlog_per_queue(
    db: Database, size: tuple[int, int]
) -> None:
    build_demo_data(db)
    app = make_app(db, **demo_adapter_kwargs())

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            rates = _series(app.screen.query_one("#rates", SeriesPlot))
            # Three mails in the last four minutes, one in each of three 5-second buckets.
            completed, figure = rates["completed/s"]
            assert len(completed) == 48 and figure == "max 0.2/s"
            assert [i for i, v in enumerate(completed) if v] == [3, 18, 32]
            assert set(completed) == {0.0, 0.2}
            assert rates["failed/s"] == ((0.0,) * 48, "max 0.0/s")

            await pilot.press("6")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, MetricsScreen)
            plots = {p.title: p for p in screen.query(SeriesPlot)}
            assert list(plots) == ["default", "exports", "mailers", "reports"]
            mail = _series(plots["mailers"])
            assert mail["completed"] == (tuple(map(float, MAIL_COMPLETED)), "20")
            assert mail["failed"] == (tuple(map(float, MAIL_FAILED)), "3")
            queued = tuple(2000.0 if ran is not None else None for ran in MAIL_RAN)
            assert mail["p95 queue"] == (queued, "2.0s")
            assert mail["p95 run"] == (tuple(MAIL_RAN), "550ms")
            assert mail["backlog age"][1] == "5s (3)"
            default = _series(plots["default"])
            assert default["backlog age"] == (tuple(DEFAULT_AGE), "4m40s (2)")
            assert default["p95 queue"][0][19] == 10_000.0  # the retry waited 10 s
            reports = _series(plots["reports"])  # no node: nothing ran, two jobs wait
            assert reports["p95 run"] == ((N,) * 30, "-")
            assert reports["backlog age"] == ((N,) * 27 + (60.0, 120.0, 120.0), "2m00s (2)")
            # What the rows show: one line per series, as wide as the widget, newest last.
            plot = plots["mailers"]
            lines = plot.lines()
            assert [line.split()[0] for line in lines] == [
                "mailers",
                "failed",
                "p95",
                "p95",
                "backlog",
            ]
            assert {len(line) for line in lines} == {plot.content_size.width}
            room = plot.bar_width()
            assert lines[2] == " " * 13 + "p95 queue   " + bars(queued, room) + "2.0s".rjust(15)
            if size[0] == 80:  # 30 minutes in 36 columns: some minutes take two
                assert room == 36
                assert bars(queued, room) == "\u00b7\u00b7" + "\u2588" * 6 + "\u00b7" + (
                    "\u2588" * 5
                    + "\u00b7"
                    + "\u2588" * 6
                    + "\u00b7"
                    + "\u2588" * 6
                    + "\u00b7"
                    + "\u2588" * 5
                    + "\u00b7\u00b7"
                )
            else:  # wider, each minute takes whole columns more
                assert room >= 2 * 30

    asyncio.run(scenario())


def test_metrics_plots_follow_a_refresh(db: Database) -> None:
    build_demo_data(db)
    app = make_app(db, **demo_adapter_kwargs())

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("6")
            await settle(pilot)
            enqueue(db, JobBuilder("import", {}).queue("imports"), now=NOW - timedelta(minutes=3))
            await pilot.press("g")
            await settle(pilot)
            plots = {p.title: p for p in app.screen.query(SeriesPlot)}
            assert list(plots) == ["default", "exports", "imports", "mailers", "reports"]
            age = _series(plots["imports"])["backlog age"]
            assert age == ((N,) * 26 + (60.0, 120.0, 180.0, 180.0), "3m00s (1)")

    asyncio.run(scenario())
