"""The results document (JSON) and its Markdown report, with the issue's targets checked.

The JSON is the record: ``format``, when, the command, the machine and its load, the versions,
the baselines, and one entry per (system, backend, workload) as produced by
:class:`bench.workloads.common.Measurement`. The Markdown is derived from it alone, so a table
can be regenerated from any saved JSON (``python -m bench.report FILE.json``). The table of
every figure, its ratios and its targets is :mod:`bench.table`.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.table import (
    KICKSIDE,
    dashboard_note,
    find,
    fmt,
    metric,
    single_enqueue_note,
    sqlite_durability_note,
    sqlite_single_enqueue_note,
    workload_table,
)

FORMAT = "kickside-bench/1"
__all__ = ["FORMAT", "KICKSIDE", "file_stem", "markdown", "summary_table", "write"]


def file_stem(at: datetime) -> str:
    """``2025-11-30T05-10-39Z``: a UTC date-time that sorts and is safe in any file system."""
    return f"{at:%Y-%m-%dT%H-%M-%S}Z"


def write(doc: dict[str, Any], directory: Path, stem: str) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` into ``directory``; returns both paths.

    Each file is written beside as ``.tmp`` first, then renamed: a reader never sees half.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / f"{stem}.json", directory / f"{stem}.md")
    for path, content in zip(
        paths, (json.dumps(doc, indent=2, sort_keys=False) + "\n", markdown(doc)), strict=True
    ):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(content)
        tmp.replace(path)
    return paths


def summary_table(doc: dict[str, Any]) -> list[str]:
    """One row per (system, backend): the headline figures, in the shape of issue 8's table."""
    results = doc["results"]
    lines = [
        "| system | backend | bulk enqueue jobs/s | single enqueue jobs/s | drain jobs/s "
        "| latency p50 / p99 ms | history slowdown | multi-node jobs/s (1 / 2 / 4 pools) "
        "| async drain jobs/s | I/O drain jobs/s (share of limit) | async latency p50 / p99 ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for system, backend in _rows(doc):

        def figure(workload: str, name: str, s: str = system, b: str = backend) -> float | None:
            return metric(find(results, s, b, workload), name)

        version = doc["versions"].get(system)
        p50, p99 = figure("latency", "p50_ms"), figure("latency", "p99_ms")
        a50, a99 = figure("async_latency", "p50_ms"), figure("async_latency", "p99_ms")
        io, share = figure("io_drain", "jobs_per_s"), figure("io_drain", "limit_fraction")
        multi = [figure("multi_node", f"jobs_per_s_{k}_pools") for k in (1, 2, 4)]
        cells = [
            f"{system} {version}" if version else system,
            backend,
            fmt(figure("bulk_enqueue", "jobs_per_s"), "jobs/s"),
            fmt(figure("single_enqueue", "jobs_per_s"), "jobs/s"),
            fmt(figure("drain", "jobs_per_s"), "jobs/s"),
            "—" if p50 is None or p99 is None else f"{p50:.1f} / {p99:.1f}",
            fmt(figure("history_scale", "slowdown"), "x"),
            "—" if all(m is None for m in multi) else " / ".join(fmt(m, "jobs/s") for m in multi),
            fmt(figure("async_drain", "jobs_per_s"), "jobs/s"),
            "—" if io is None else f"{fmt(io, 'jobs/s')} ({fmt(share, 'share')})",
            "—" if a50 is None or a99 is None else f"{a50:.1f} / {a99:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for entry in doc["results"]:
        key = (entry["system"], entry["backend"])
        if key not in seen:
            seen.append(key)
    return seen


def markdown(doc: dict[str, Any]) -> str:
    """The whole report as Markdown."""
    machine = doc["machine"]
    v = doc["versions"]
    load = " / ".join(f"{x:.2f}" for x in machine["load_average"]) + " at start"
    if machine.get("load_average_at_end"):
        load += f", {machine['load_average_at_end'][0]:.2f} at the end"
    lines = [f"## Kickside benchmark, {doc['started_at']}", ""]
    if doc["quick"]:
        lines += [
            f"**Quick run: every count scaled by {doc['scale']:g}. A smoke test, not a "
            "measurement: these numbers are not representative.**",
            "",
        ]
    lines += [f"> **WARNING**: {w}" for w in doc["warnings"]]
    if doc["warnings"]:
        lines.append("")
    lines += [
        f"Machine: {machine['cpu_count']} cores ({machine.get('cpu_model') or 'unknown CPU'}), "
        f"load average {load}; Python {machine['python']}; PostgreSQL "
        f"{v.get('postgresql') or '—'}; SQLite {v.get('sqlite')}; kickside {v.get('kickside')} "
        f"(SQLAlchemy {v.get('sqlalchemy')}, psycopg {v.get('psycopg')}).",
        "",
        f"Command: `{doc['command']}`",
        "",
        *summary_table(doc),
        "",
        "Every figure (PostgreSQL unless the row says SQLite; ↑ higher is better, ↓ lower is "
        "better; kickside/peer is the plain quotient of the two figures"
        + (
            "; a quick run only checks that every workload runs: its pass/MISS is no verdict"
            if doc["quick"]
            else ""
        )
        + "):",
        "",
        *workload_table(doc),
        "",
    ]
    for note in (
        single_enqueue_note(doc),
        sqlite_durability_note(doc),
        sqlite_single_enqueue_note(doc),
        dashboard_note(doc),
    ):
        if note:
            lines += [*note, ""]
    errors = [e for e in doc["results"] if e.get("error")]
    if errors:
        lines += ["Errors:", ""]
        lines += [f"- {e['system']} {e['backend']} {e['workload']}: {e['error']}" for e in errors]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the Markdown report of a saved results JSON."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench.report RESULTS.json", file=sys.stderr)
        return 2
    doc = json.loads(Path(args[0]).read_text())
    if doc.get("format") != FORMAT:
        print(f"{args[0]} is not a {FORMAT} document", file=sys.stderr)
        return 1
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
