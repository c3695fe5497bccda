"""The results document (JSON) and its Markdown table, with the issue's targets checked.

The JSON is the record: ``format``, when, the command, the machine and its load, the versions,
the baselines, and one entry per (system, backend, workload) as produced by
:class:`bench.workloads.common.Measurement`. The Markdown is derived from it alone, so a table
can be regenerated from any saved JSON (``python -m bench.report FILE.json``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

FORMAT = "kickside-bench/1"
KICKSIDE = "kickside"

Entry = dict[str, Any]


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


def _find(results: Iterable[Entry], system: str, backend: str, workload: str) -> Entry | None:
    for entry in results:
        if (entry["system"], entry["backend"], entry["workload"]) == (system, backend, workload):
            return entry if entry.get("error") is None else None
    return None


def _metric(entry: Entry | None, name: str) -> float | None:
    if entry is None:
        return None
    value = entry["metrics"].get(name)
    return float(value) if value is not None else None


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _ms(p50: float | None, p99: float | None) -> str:
    if p50 is None or p99 is None:
        return "—"
    return f"{p50:.1f} / {p99:.1f}"


def _rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for entry in doc["results"]:
        key = (entry["system"], entry["backend"])
        if key not in seen:
            seen.append(key)
    return seen


def summary_table(doc: dict[str, Any]) -> list[str]:
    """One row per (system, backend): the issue's headline figures."""
    results = doc["results"]
    lines = [
        "| system | backend | bulk enqueue jobs/s | single enqueue jobs/s | drain jobs/s "
        "| latency p50 / p99 ms | history slowdown |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for system, backend in _rows(doc):
        lat = _find(results, system, backend, "latency")
        slowdown = _metric(_find(results, system, backend, "history_scale"), "slowdown")
        version = doc["versions"].get(system)
        cells = [
            f"{system} {version}" if version else system,
            backend,
            _rate(_metric(_find(results, system, backend, "bulk_enqueue"), "jobs_per_s")),
            _rate(_metric(_find(results, system, backend, "single_enqueue"), "jobs_per_s")),
            _rate(_metric(_find(results, system, backend, "drain"), "jobs_per_s")),
            _ms(_metric(lat, "p50_ms"), _metric(lat, "p99_ms")),
            "—" if slowdown is None else f"{slowdown:.2f}x",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _fastest_peer(doc: dict[str, Any], workload: str, metric: str) -> tuple[str, float] | None:
    best: tuple[str, float] | None = None
    for entry in doc["results"]:
        if (
            entry["system"] != KICKSIDE
            and entry["backend"] == "postgresql"
            and entry["workload"] == workload
            and entry.get("error") is None
        ):
            value = float(entry["metrics"][metric])
            if best is None or value > best[1]:
                best = (entry["system"], value)
    return best


def targets(doc: dict[str, Any]) -> list[str]:
    """The issue's targets for Kickside on PostgreSQL, each with its measured value."""
    results = doc["results"]

    def ks(workload: str, metric: str) -> float | None:
        return _metric(_find(results, KICKSIDE, "postgresql", workload), metric)

    rows: list[tuple[str, str, bool | None]] = []
    for workload, factor, label in (("drain", 2.0, "drain"), ("bulk_enqueue", 1.5, "bulk")):
        mine, peer = ks(workload, "jobs_per_s"), _fastest_peer(doc, workload, "jobs_per_s")
        if mine is not None and peer is not None:
            ratio = mine / peer[1]
            rows.append(
                (
                    f"{label} ≥ {factor}x the fastest peer",
                    f"{ratio:.2f}x {peer[0]}",
                    ratio >= factor,
                )
            )
        else:
            rows.append((f"{label} ≥ {factor}x the fastest peer", "no peer measured", None))
    tps = doc.get("baselines", {}).get("pgbench_insert", {}).get("tps")
    single = ks("single_enqueue", "jobs_per_s")
    if tps and single is not None:
        share = single / tps
        rows.append(("single enqueue ≥ 90 % of pgbench inserts", f"{share:.0%}", share >= 0.9))
    else:
        rows.append(("single enqueue ≥ 90 % of pgbench inserts", "no pgbench baseline", None))
    for metric, limit in (("p50_ms", 3.0), ("p99_ms", 20.0)):
        value = ks("latency", metric)
        shown = "—" if value is None else f"{value:.1f} ms"
        met = None if value is None else value <= limit
        rows.append((f"latency {metric[:3]} ≤ {limit:g} ms", shown, met))
    slowdown = ks("history_scale", "slowdown")
    rows.append(
        (
            "history slowdown ≤ 1.2x",
            "—" if slowdown is None else f"{slowdown:.2f}x",
            None if slowdown is None else slowdown <= 1.2,
        )
    )
    lines = ["| target (Kickside, PostgreSQL) | measured | met |", "| --- | ---: | :---: |"]
    for label, shown, met in rows:
        lines.append(f"| {label} | {shown} | {'—' if met is None else 'yes' if met else 'NO'} |")
    return lines


def ratios(doc: dict[str, Any]) -> list[str]:
    """Kickside/peer for each peer measured on PostgreSQL (empty when there is none)."""
    results = doc["results"]
    peers = sorted({e["system"] for e in results if e["system"] != KICKSIDE})
    if not peers:
        return []
    lines = [
        "| peer | bulk enqueue | single enqueue | drain | latency p50 (peer/kickside) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for peer in peers:
        cells = [peer]
        for workload in ("bulk_enqueue", "single_enqueue", "drain"):
            mine = _metric(_find(results, KICKSIDE, "postgresql", workload), "jobs_per_s")
            theirs = _metric(_find(results, peer, "postgresql", workload), "jobs_per_s")
            cells.append("—" if not mine or not theirs else f"{mine / theirs:.2f}x")
        mine = _metric(_find(results, KICKSIDE, "postgresql", "latency"), "p50_ms")
        theirs = _metric(_find(results, peer, "postgresql", "latency"), "p50_ms")
        cells.append("—" if not mine or not theirs else f"{theirs / mine:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _others(doc: dict[str, Any]) -> list[str]:
    results = doc["results"]
    lines = []
    for backend in ("postgresql", "sqlite"):
        copy = _metric(_find(results, KICKSIDE, backend, "bulk_enqueue_copy"), "jobs_per_s")
        bulk = _metric(_find(results, KICKSIDE, backend, "bulk_enqueue"), "jobs_per_s")
        if copy is not None:
            vs = f" ({copy / bulk:.2f}x enqueue_many)" if bulk else ""
            lines.append(
                f"- {backend}: bulk enqueue through COPY (what-if): {copy:,.0f} jobs/s{vs}"
            )
        embedded = _find(results, KICKSIDE, backend, "latency_inprocess")
        if embedded is not None:
            lines.append(
                f"- {backend}: latency with the pool in the enqueuing process: "
                f"{_ms(_metric(embedded, 'p50_ms'), _metric(embedded, 'p99_ms'))} ms (p50 / p99)"
            )
        history = _find(results, KICKSIDE, backend, "history_scale")
        if history is not None:
            sizes = history["params"]["history"]
            lines.append(
                f"- {backend}: claim-and-complete "
                f"{_metric(history, 'small_us_per_job'):.0f} µs/job with {sizes['small']:,} "
                f"jobs of history, {_metric(history, 'large_us_per_job'):.0f} µs/job "
                f"with {sizes['large']:,}"
            )
    pgbench = doc.get("baselines", {}).get("pgbench_insert", {})
    if pgbench.get("tps"):
        lines.append(
            f"- pgbench single-row INSERT, one client: {pgbench['tps']:,.0f} transactions/s"
        )
    elif pgbench.get("reason"):
        lines.append(f"- pgbench baseline: not measured ({pgbench['reason']})")
    return lines


def markdown(doc: dict[str, Any]) -> str:
    """The whole report as Markdown."""
    machine = doc["machine"]
    v = doc["versions"]
    load = " / ".join(f"{x:.2f}" for x in machine["load_average"])
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
        f"load average {load} at start; Python {machine['python']}; PostgreSQL "
        f"{v.get('postgresql') or '—'}; SQLite {v.get('sqlite')}; kickside {v.get('kickside')} "
        f"(SQLAlchemy {v.get('sqlalchemy')}, psycopg {v.get('psycopg')}).",
        "",
        f"Command: `{doc['command']}`",
        "",
        *summary_table(doc),
        "",
    ]
    others = _others(doc)
    if others:
        lines += ["Other figures:", "", *others, ""]
    lines += ["Targets from issue 8:", "", *targets(doc), ""]
    peer_lines = ratios(doc)
    if peer_lines:
        lines += ["Kickside / peer (higher is better for Kickside):", "", *peer_lines, ""]
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
