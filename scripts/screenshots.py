"""Regenerate the dashboard screenshots in screenshots/ from the deterministic demo data.

    .venv/bin/python scripts/screenshots.py [--out screenshots]

Builds the demo data set of ``tests/tui/fixtures.py`` in a temporary SQLite file, opens the
dashboard on it with the clock pinned, and saves an SVG of every view (and a PNG beside it when
``rsvg-convert`` or ``cairosvg`` is available). The files are generated, never edited by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kickside_engine import connect_database, migrate  # noqa: E402
from tests.tui.fixtures import build_demo_data, demo_app, settle  # noqa: E402

#: (file name, key presses, terminal size)
SHOTS: tuple[tuple[str, tuple[str, ...], tuple[int, int]], ...] = (
    ("1-overview", ("1",), (120, 40)),
    ("2-jobs", ("2",), (120, 40)),
    ("3-slots", ("3",), (120, 40)),
    ("4-leases", ("4",), (120, 40)),
    ("5-capacity", ("5",), (120, 40)),
    ("6-metrics", ("6",), (120, 40)),
    ("7-queues-nodes-cron", ("7",), (120, 40)),
    ("8-confirm-cancel", ("2", "c"), (120, 40)),
    ("9-help", ("question_mark",), (120, 40)),
    ("overview-80x24", ("1",), (80, 24)),
    ("jobs-80x24", ("2",), (80, 24)),
)


def _png(svg: Path) -> bool:
    """Convert ``svg`` to PNG beside it, if a converter is installed."""
    png = svg.with_suffix(".png")
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True)
        return True
    if importlib.util.find_spec("cairosvg") is not None:
        import cairosvg  # type: ignore[import-not-found]

        cairosvg.svg2png(url=str(svg), write_to=str(png))
        return True
    return False


async def _shoot(url: str, name: str, keys: tuple[str, ...], size: tuple[int, int],
                 out: Path) -> Path:
    db = connect_database(url)
    try:
        app = demo_app(db)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            for key in keys:
                await pilot.press(key)
                await settle(pilot)
            path = out / f"{name}.svg"
            app.save_screenshot(filename=path.name, path=str(out))
            return path
    finally:
        db.dispose()


def main() -> None:
    """Build the demo data and write every screenshot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'demo.sqlite3'}"
        db = connect_database(url)
        try:
            migrate.upgrade(db)
            build_demo_data(db)
        finally:
            db.dispose()
        pngs = 0
        for name, keys, size in SHOTS:
            path = asyncio.run(_shoot(url, name, keys, size, out))
            pngs += _png(path)
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if not pngs:
        print("no SVG converter (rsvg-convert or cairosvg): SVG only")


if __name__ == "__main__":
    main()
