"""A PNG of throughput and latency per system, from a results JSON, for the README.

``python -m bench.plot RESULTS.json [OUT.png]``. It needs matplotlib, which lives in the
harness's own ``bench/.peers-venv`` (never among Kickside's dependencies): the runner calls it
with that environment's Python. Standard library and matplotlib only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: The throughput groups: (workload, metric, label).
THROUGHPUT = (
    ("bulk_enqueue", "jobs_per_s", "bulk enqueue"),
    ("single_enqueue", "jobs_per_s", "single enqueue"),
    ("drain", "jobs_per_s", "drain, 1 pool"),
    ("multi_node", "jobs_per_s_1_pools", "multi-node, 1 pool"),
    ("multi_node", "jobs_per_s_4_pools", "multi-node, 4 pools"),
    ("async_drain", "jobs_per_s", "async drain"),
    ("io_drain", "jobs_per_s", "I/O drain, 200 slots"),
)


def _series(doc: dict[str, Any]) -> list[tuple[str, dict[str, dict[str, float]]]]:
    """``(label, {workload: metrics})`` per system and backend, Kickside first."""
    series: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for entry in doc["results"]:
        if entry.get("error") is None and entry["metrics"]:
            key = (entry["system"], entry["backend"])
            series.setdefault(key, {})[entry["workload"]] = entry["metrics"]
    order = sorted(series, key=lambda k: (k[0] != "kickside", k[1] != "postgresql", k))
    return [(f"{s} ({'PG' if b == 'postgresql' else 'SQLite'})", series[(s, b)]) for s, b in order]


def plot(doc: dict[str, Any], out: Path) -> None:
    """Draw jobs/s per workload (log scale) and latency p50/p99 per system into ``out``."""
    import matplotlib  # type: ignore[import-not-found]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found]

    series = _series(doc)
    groups = [g for g in THROUGHPUT if any(g[1] in m.get(g[0], {}) for _, m in series)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 5.2), width_ratios=(3, 2))
    width = 0.8 / max(1, len(series))
    for i, (label, metrics) in enumerate(series):
        xs = [j + i * width for j in range(len(groups))]
        ys = [metrics.get(w, {}).get(name, 0.0) for w, name, _ in groups]
        bars = left.bar(xs, ys, width, label=label)
        left.bar_label(
            bars, [f"{y:,.0f}" if y else "" for y in ys], fontsize=6, rotation=90, padding=2
        )
    tps = doc.get("baselines", {}).get("pgbench_insert", {}).get("tps")
    if tps and any(w == "single_enqueue" for w, _, _ in groups):
        j = [w for w, _, _ in groups].index("single_enqueue")
        left.hlines(tps, j - width / 2, j + 0.8 - width / 2, colors="black", linestyles="dashed")
        left.annotate("pgbench INSERT", (j - width / 2, tps), fontsize=7, va="bottom")
    left.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(groups))])
    left.set_xticklabels([title for _, _, title in groups], fontsize=8)
    left.set_yscale("log")
    top = max([1.0] + [m.get(w, {}).get(n, 0.0) for _, m in series for w, n, _ in groups])
    left.set_ylim(top=top * 4)  # room for the figures above the tallest bar
    left.set_ylabel("jobs/s (higher is better)")
    left.set_title("Throughput")
    left.legend(fontsize=8)

    # Every system with its pool in a process of its own, as deployed (SQLite included since
    # its wake sockets; runs before them show its poll).
    timed = [(label, m["latency"]) for label, m in series if "latency" in m]
    for j, (_label, lat) in enumerate(timed):
        for dx, name, color in ((-0.2, "p50", "tab:blue"), (0.2, "p99", "tab:orange")):
            value = lat[f"{name}_ms"]
            bars = right.bar(j + dx, value, 0.4, color=color, label=name if j == 0 else None)
            right.bar_label(bars, [f"{value:.1f}"], fontsize=7, padding=2)
    right.set_xticks(range(len(timed)))
    right.set_xticklabels([label for label, _ in timed], fontsize=8, rotation=15)
    right.set_ylabel("enqueue-to-start ms (lower is better)")
    right.set_title("Latency, idle worker, one job every 20 ms")
    right.legend(fontsize=8)

    quick = " (quick run: not representative)" if doc.get("quick") else ""
    load = doc["machine"]["load_average"][0]
    fig.suptitle(
        f"{doc['started_at']}, {doc['machine']['cpu_count']} cores, load {load:.2f}{quick}"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Plot a saved results JSON beside it (or into the path given)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        print("usage: python -m bench.plot RESULTS.json [OUT.png]", file=sys.stderr)
        return 2
    source = Path(args[0])
    out = Path(args[1]) if len(args) == 2 else source.with_suffix(".png")
    plot(json.loads(source.read_text()), out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
