"""Two commits side by side: ``python -m bench.ab OLD NEW [--rounds 3] [--only NAMES]``.

A regression check for a change that must not cost speed (a refactor, a new claim): each
commit is checked out in a temporary worktree and its own harness (``python -m bench.run``,
Kickside only, no peers) runs there, old and new alternately, ``--rounds`` times each, so that
the machine's drift and noise fall on both alike. Prints, per workload, backend and metric, the
median of each side's rounds, the new/old quotient and every round's figure, and writes the
same table to ``bench/results/ab-<UTC>.md``. Both sides run with this interpreter and its
installed dependencies; only the Kickside code and harness differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from bench import machine

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
DEFAULT_ONLY = "drain,single_enqueue,latency"
#: Parts of metric names where lower is better (the rest are rates: higher is better).
LOWER_IS_BETTER = ("_ms", "_us", "seconds", "slowdown", "cpu")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("old", help="the baseline commit (any git revision)")
    parser.add_argument("new", help="the commit to compare with it")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument(
        "--only", default=DEFAULT_ONLY, help=f"workloads to run (default {DEFAULT_ONLY})"
    )
    parser.add_argument("--backend", default="all", help="postgresql, sqlite or all")
    parser.add_argument("--quick", action="store_true", help="pass --quick (a smoke run)")
    return parser.parse_args(argv)


@contextmanager
def worktree(revision: str, parent: Path) -> Iterator[tuple[Path, str]]:
    """A detached checkout of ``revision`` under ``parent``, removed afterwards."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", f"{revision}^{{commit}}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    path = parent / commit
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(path), commit], cwd=ROOT, check=True
    )
    try:
        yield path, commit
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


def run_side(checkout: Path, results: Path, args: argparse.Namespace) -> list[dict[str, object]]:
    """One run of the harness in ``checkout``; its results (Kickside's rows)."""
    results.mkdir(parents=True)
    command = [
        sys.executable,
        "-m",
        "bench.run",
        "--no-peers",
        "--no-pgbench",
        "--no-plot",
        "--only",
        args.only,
        "--backend",
        args.backend,
        "--results-dir",
        str(results),
    ]
    if args.quick:
        command.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run(command, cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    (document,) = results.glob("*.json")
    rows: list[dict[str, object]] = json.loads(document.read_text())["results"]
    return [r for r in rows if r.get("system") == "kickside" and not r.get("error")]


def table(
    figures: dict[tuple[str, str, str], dict[str, list[float]]], old: str, new: str
) -> list[str]:
    """The Markdown table of medians, quotients and rounds."""
    lines = [
        f"| workload | backend | metric | {old} (median) | {new} (median) | new/old | rounds "
        f"{old} | rounds {new} |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for (workload, backend, metric), sides in sorted(figures.items()):
        a, b = sides.get(old, []), sides.get(new, [])
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        better = "lower" if any(part in metric for part in LOWER_IS_BETTER) else "higher"
        quotient = f"{mb / ma:.2f}x ({better} is better)" if ma else "—"
        lines.append(
            f"| {workload} | {backend} | {metric} | {_figure(ma)} | {_figure(mb)} | {quotient} | "
            f"{', '.join(map(_figure, a))} | {', '.join(map(_figure, b))} |"
        )
    return lines


def _figure(value: float) -> str:
    """Three significant figures or more, with thousands separators."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    figures: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    started = datetime.now(UTC)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kickside-ab-") as scratch:
        base = Path(scratch)
        with (
            worktree(args.old, base) as (old_dir, old),
            worktree(args.new, base) as (
                new_dir,
                new,
            ),
        ):
            for round_ in range(args.rounds):
                for label, checkout in ((old, old_dir), (new, new_dir)):
                    print(f"round {round_ + 1}/{args.rounds}: {label}", file=sys.stderr)
                    rows = run_side(checkout, base / f"{label}-{round_}", args)
                    for row in rows:
                        metrics = row.get("metrics") or {}
                        assert isinstance(metrics, dict)
                        for metric, value in metrics.items():
                            if isinstance(value, int | float):
                                key = (str(row["workload"]), str(row["backend"]), metric)
                                figures[key][label].append(float(value))
    about = machine.machine_info()
    info = f"{about['cpu_count']} cores ({about['cpu_model']}), Python {about['python']}."
    header = [
        f"## A/B: {old} (old) against {new} (new), {args.rounds} rounds each, alternately",
        "",
        f"Started {started:%Y-%m-%d %H:%M} UTC; load average at start "
        f"{' / '.join(f'{v:.2f}' for v in load_before)}, at the end "
        f"{' / '.join(f'{v:.2f}' for v in os.getloadavg())}. {info}".rstrip(),
        f"Command: `python -m bench.ab {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
    ]
    text = "\n".join([*header, *table(figures, old, new)]) + "\n"
    print(text)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"ab-{started:%Y-%m-%dT%H-%M-%SZ}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
