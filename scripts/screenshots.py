"""Regenerate the dashboard screenshots in screenshots/ from the deterministic demo data.

    .venv/bin/python scripts/screenshots.py [--out screenshots]

Builds the demo data set of ``tests/tui/fixtures.py`` in a temporary SQLite file, opens the
dashboard on it with the clock pinned, and saves an SVG of every view, and a PNG beside it when
``rsvg-convert`` or ``cairosvg`` (the ``dev`` extra, with the system's libcairo) works here;
otherwise it says why and keeps the SVGs. The files are generated, never edited by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
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
    ("10-job-and-its-log", ("4", "enter"), (120, 40)),
    ("overview-80x24", ("1",), (80, 24)),
    ("jobs-80x24", ("2",), (80, 24)),
    ("metrics-80x24", ("6",), (80, 24)),
    ("leases-80x24", ("4",), (80, 24)),
)


def _monospaced(svg: Path) -> bytes:
    """The SVG with a monospace fallback for Textual's web font, which a converter lacks.

    Without one the terminal's text is set in a proportional font and its columns drift.
    """
    text = svg.read_text().replace(
        "font-family: Fira Code, monospace", 'font-family: "DejaVu Sans Mono", monospace'
    )
    return text.encode()


def png_converter() -> tuple[Callable[[Path, Path], None] | None, str]:
    """The first SVG-to-PNG converter that works here, or None and why there is none.

    ``rsvg-convert`` if installed, else ``cairosvg`` (the ``dev`` extra), which needs the
    system's libcairo: without it the import fails and the screenshots stay SVG only.
    """
    if shutil.which("rsvg-convert"):

        def rsvg(svg: Path, png: Path) -> None:
            subprocess.run(["rsvg-convert", "-o", str(png)], input=_monospaced(svg), check=True)

        return rsvg, "rsvg-convert"
    try:
        import cairosvg  # type: ignore[import-untyped,unused-ignore]
    except (ImportError, OSError) as exc:  # not installed, or libcairo missing beneath it
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, f"no SVG converter (rsvg-convert, or cairosvg with libcairo): {why}"

    def cairo(svg: Path, png: Path) -> None:
        cairosvg.svg2png(bytestring=_monospaced(svg), write_to=str(png))

    return cairo, "cairosvg"


async def _shoot(
    url: str, name: str, keys: tuple[str, ...], size: tuple[int, int], out: Path
) -> Path:
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
        convert, how = png_converter()
        for name, keys, size in SHOTS:
            path = asyncio.run(_shoot(url, name, keys, size, out))
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            if convert is not None:
                convert(path, path.with_suffix(".png"))
                print(f"wrote {shown} and its PNG ({how})")
            else:
                print(f"wrote {shown}")
    if convert is None:
        print(f"SVG only: {how}")


if __name__ == "__main__":
    main()
