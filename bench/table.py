"""The results table: every workload's figure for Kickside and each peer, the ratio
Kickside/peer, and issue 8's target for Kickside with whether it was met.

Each :class:`Row` names one figure (a workload's metric on one backend); its target, if it has
one, is a small function of the whole results document (some targets compare with the fastest
peer or with a pgbench baseline). The figures come from the results JSON alone, so a saved run
renders again (``python -m bench.report FILE.json``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from bench.refreshes import TARGET_MS, entry_figure, spreads

KICKSIDE = "kickside"

Doc = dict[str, Any]
Entry = dict[str, Any]
#: (what the target says, what was measured against it, met: True/False/None = not measured)
Verdict = tuple[str, str, bool | None]


def find(results: Iterable[Entry], system: str, backend: str, workload: str) -> Entry | None:
    """The result entry of ``system`` for ``workload`` on ``backend``, if it ran without error."""
    for entry in results:
        if (entry["system"], entry["backend"], entry["workload"]) == (system, backend, workload):
            return entry if entry.get("error") is None else None
    return None


def metric(entry: Entry | None, name: str) -> float | None:
    """A metric of an entry (None when the entry or the metric is missing)."""
    if entry is None:
        return None
    value = entry["metrics"].get(name)
    return float(value) if value is not None else None


def peers(doc: Doc) -> list[str]:
    """The peers that appear in the results, in a stable order."""
    return sorted({e["system"] for e in doc["results"] if e["system"] != KICKSIDE})


@dataclass(frozen=True)
class Row:
    """One figure of the table."""

    number: str
    title: str
    workload: str
    metric: str
    unit: str
    higher_is_better: bool
    backend: str = "postgresql"
    target: Callable[[Doc, float | None], Verdict] | None = None
    #: Reads the figure from an entry instead of its stored metric (one derived from ``runs``).
    figure: Callable[[Entry, str], float | None] | None = None

    def label(self, doc: Doc) -> str:
        """The title, its placeholders filled from Kickside's parameters.

        ``{small}``/``{large}``: the history sizes; ``{most}``/``{least}``: the pool counts;
        ``{backlog}``: the keyed backlog.
        """
        if "{" not in self.title:
            return self.title
        entry = find(doc["results"], KICKSIDE, self.backend, self.workload) or {}
        params = entry.get("params", {})
        sizes = params.get("history", {})
        counts = params.get("pool_counts") or [1, 4]
        return self.title.format(
            small=f"{sizes['small']:,}" if "small" in sizes else "small",
            large=f"{sizes['large']:,}" if "large" in sizes else "large",
            most=counts[-1],
            least=counts[0],
            backlog=f"{params['backlog']:,}" if "backlog" in params else "large",
        )

    def value(self, doc: Doc, system: str) -> float | None:
        """This row's figure for ``system``."""
        entry = find(doc["results"], system, self.backend, self.workload)
        if self.figure is not None and entry is not None:
            return self.figure(entry, self.metric)
        return metric(entry, self.metric)


def _fastest_peer(doc: Doc, row: Row) -> tuple[str, float] | None:
    best: tuple[str, float] | None = None
    for peer in peers(doc):
        value = row.value(doc, peer)
        if value is None:
            continue
        better = best is None or (value > best[1] if row.higher_is_better else value < best[1])
        if better:
            best = (peer, value)
    return best


def times_fastest_peer(factor: float, row: Row) -> Callable[[Doc, float | None], Verdict]:
    """Kickside's rate at least ``factor`` times the fastest peer's."""
    return _against_fastest_peer(row, f"≥ {factor:g}x the fastest peer", lambda r: r >= factor)


def within_fastest_peer(factor: float, row: Row) -> Callable[[Doc, float | None], Verdict]:
    """Kickside's figure (lower is better) at most ``factor`` times the fastest peer's."""
    return _against_fastest_peer(row, f"≤ {factor:g}x the fastest peer", lambda r: r <= factor)


def _against_fastest_peer(
    row: Row, wanted: str, met: Callable[[float], bool]
) -> Callable[[Doc, float | None], Verdict]:
    """A target on Kickside's figure over the fastest peer's: ``wanted`` says it, ``met``
    judges the ratio."""

    def verdict(doc: Doc, mine: float | None) -> Verdict:
        best = _fastest_peer(doc, row)
        if mine is None or best is None:
            return wanted, "no peer measured" if mine is not None else "—", None
        ratio = mine / best[1]
        return wanted, f"{ratio:.2f}x {best[0]}", met(ratio)

    return verdict


def at_most_peer(peer: str, row: Row) -> Callable[[Doc, float | None], Verdict]:
    """Kickside's figure (lower is better) no higher than ``peer``'s in the same run."""

    def verdict(doc: Doc, mine: float | None) -> Verdict:
        wanted = f"≤ {peer}'s"
        theirs = row.value(doc, peer)
        if mine is None or theirs is None:
            return wanted, f"{peer} not measured" if mine is not None else "—", None
        return wanted, f"{mine / theirs:.2f}x {peer}", mine <= theirs

    return verdict


def share_of_baseline(share: float, baseline: str, label: str) -> Callable[..., Verdict]:
    """Kickside's rate at least ``share`` of a pgbench baseline's transactions/s."""

    def verdict(doc: Doc, mine: float | None) -> Verdict:
        tps = doc.get("baselines", {}).get(baseline, {}).get("tps")
        wanted = f"≥ {share:.0%} of {label}"
        if mine is None or not tps:
            return wanted, "no baseline" if mine is not None else "—", None
        return f"{wanted} ({tps:,.0f}/s)", f"{mine / tps:.0%}", mine / tps >= share

    return verdict


def at_most(limit: float, unit: str) -> Callable[[Doc, float | None], Verdict]:
    """Kickside's figure no higher than ``limit`` (the figure is in the kickside column)."""

    def verdict(doc: Doc, mine: float | None) -> Verdict:
        wanted = f"= {limit:g}" if limit == 0 else f"≤ {limit:g}{unit}"
        return wanted, "", None if mine is None else mine <= limit

    return verdict


def at_least(limit: float, unit: str) -> Callable[[Doc, float | None], Verdict]:
    """Kickside's figure no lower than ``limit`` (the figure is in the kickside column)."""

    def verdict(doc: Doc, mine: float | None) -> Verdict:
        return f"≥ {limit:g}{unit}", "", None if mine is None else mine >= limit

    return verdict


def _rows() -> list[Row]:
    bulk = Row("1", "bulk enqueue", "bulk_enqueue", "jobs_per_s", "jobs/s", True)
    drain = Row("3", "drain, 1 pool", "drain", "jobs_per_s", "jobs/s", True)
    rows = [
        replace(bulk, target=times_fastest_peer(1.5, bulk)),
        Row(
            "1b",
            "bulk enqueue, raw COPY of prebuilt rows (ceiling)",
            "bulk_enqueue_copy",
            "jobs_per_s",
            "jobs/s",
            True,
        ),
        Row(
            "1c",
            "bulk enqueue of builders (enqueue_many, any mix of jobs)",
            "bulk_enqueue_builders",
            "jobs_per_s",
            "jobs/s",
            True,
        ),
        Row(
            "2",
            "single enqueue",
            "single_enqueue",
            "jobs_per_s",
            "jobs/s",
            True,
            target=share_of_baseline(0.9, "pgbench_insert", "pgbench INSERT"),
        ),
        replace(drain, target=times_fastest_peer(2.0, drain)),
        Row(
            "3b",
            "dispatch round trip p50 (supervisor → executor → supervisor)",
            "dispatch",
            "round_trip_p50_us",
            "µs",
            False,
            backend="sqlite",
            target=at_most(1000, " µs"),
        ),
        Row(
            "3b",
            "dispatch CPU per job, supervisor + executor",
            "dispatch",
            "cpu_us_per_job",
            "µs",
            False,
            backend="sqlite",
        ),
        Row("4", "latency p50", "latency", "p50_ms", "ms", False, target=at_most(3, " ms")),
        Row("4", "latency p99", "latency", "p99_ms", "ms", False, target=at_most(20, " ms")),
        Row("4b", "latency p50, pool in-process", "latency_inprocess", "p50_ms", "ms", False),
        Row(
            "5",
            "claim+complete, {small} jobs in history",
            "history_scale",
            "small_us_per_job",
            "µs/job",
            False,
        ),
        Row(
            "5",
            "claim+complete, {large} jobs in history",
            "history_scale",
            "large_us_per_job",
            "µs/job",
            False,
        ),
        Row(
            "5",
            "history slowdown ({large} / {small})",
            "history_scale",
            "slowdown",
            "x",
            False,
            target=at_most(1.2, "x"),
        ),
    ]
    for pools in (1, 2, 4):
        rows.append(
            Row(
                "6",
                f"multi-node, {pools} pool{'s' if pools > 1 else ''}",
                "multi_node",
                f"jobs_per_s_{pools}_pools",
                "jobs/s",
                True,
            )
        )
    for pools in (1, 4):
        rows.append(
            Row(
                "6",
                f"CPU (pools + PostgreSQL), {pools} pool{'s' if pools > 1 else ''}",
                "multi_node",
                f"cpu_s_per_1000_jobs_{pools}_pools",
                "CPU s/1000 jobs",
                False,
            )
        )
    rows += [
        Row(
            "6",
            "throughput, {most} pools / {least} pool",
            "multi_node",
            "throughput_ratio",
            "x",
            True,
            target=at_least(1.0, "x"),
        ),
        Row(
            "6",
            "CPU per job, {most} pools / {least} pool",
            "multi_node",
            "cpu_ratio",
            "x",
            False,
            target=at_most(1.2, "x"),
        ),
        Row(
            "6",
            "concurrent duplicate executions",
            "multi_node",
            "concurrent_duplicates",
            "count",
            False,
            target=at_most(0, ""),
        ),
        Row("6", "extra executions (any)", "multi_node", "extra_executions", "count", False),
        # Every refresh must stay under 150 ms: judged on the slowest single timed refresh.
        Row(
            "7",
            "dashboard refresh, slowest single refresh (max)",
            "dashboard",
            "slowest_max_ms",
            "ms",
            False,
            target=at_most(TARGET_MS, " ms"),
            figure=entry_figure,
        ),
        Row(
            "7",
            "dashboard refresh, slowest view's p95",
            "dashboard",
            "slowest_p95_ms",
            "ms",
            False,
            figure=entry_figure,
        ),
        Row(
            "7",
            "dashboard refresh, slowest view's median",
            "dashboard",
            "max_refresh_ms",
            "ms",
            False,
        ),
        Row(
            "7",
            "dashboard resident memory (peak)",
            "dashboard",
            "peak_rss_mb",
            "MB",
            False,
            target=at_most(250, " MB"),
        ),
    ]
    rows += _async_rows()
    for backend in ("postgresql", "sqlite"):
        prefix = "" if backend == "postgresql" else "SQLite: "
        for title, name in (
            ("claim of 10 past one key's {backlog}-job backlog, median", "claim_p50_ms"),
            ("claim of 10 past one key's backlog, slowest", "claim_max_ms"),
            ("claim finding nothing admissible past the backlog", "empty_claim_ms"),
            ("claim of 10 from a keyless backlog of the same size, median", "keyless_claim_p50_ms"),
        ):
            rows.append(
                Row("9", prefix + title, "keyed_claims", name, "ms", False, backend=backend)
            )
        for title, name, unit, higher, target in (
            (
                "rate-limited group: fewest starts per window / rate",
                "admitted_min_ratio",
                "x",
                True,
                at_least(0.99, "x"),
            ),
            (
                "rate-limited group: most starts per window / rate",
                "admitted_max_ratio",
                "x",
                False,
                at_most(1.0, "x"),
            ),
            ("rate-limited claim, per job", "claim_ms_per_job", "ms", False, None),
            (
                "rate-limited claim / unlimited claim, per job",
                "cost_ratio",
                "x",
                False,
                at_most(1.5, "x"),
            ),
        ):
            rows.append(
                Row(
                    "10",
                    prefix + title,
                    "rate_limits",
                    name,
                    unit,
                    higher,
                    backend=backend,
                    target=target,
                )
            )
        for title, name, unit, higher, target in (
            (
                "workflow: release of the final step (the last upstream's settle), slowest",
                "final_release_max_ms",
                "ms",
                False,
                at_most(50, " ms"),
            ),
            (
                "workflow: settle of 10 fan-in upstreams, p99",
                "leaf_settle_p99_ms",
                "ms",
                False,
                at_most(50, " ms"),
            ),
            ("workflow: fan-out release of 10,000 jobs", "fanout_release_ms", "ms", False, None),
            ("workflow job, claim + settle", "workflow_ms_per_job", "ms", False, None),
            ("plain job, claim + settle", "plain_ms_per_job", "ms", False, None),
            (
                "workflow job / plain job, claim + settle",
                "cost_ratio",
                "x",
                False,
                at_most(1.5, "x"),
            ),
            ("workflow insert", "insert_jobs_per_s", "jobs/s", True, None),
            ("enqueue_many of as many plain jobs", "plain_insert_jobs_per_s", "jobs/s", True, None),
        ):
            rows.append(
                Row(
                    "11",
                    prefix + title,
                    "workflows",
                    name,
                    unit,
                    higher,
                    backend=backend,
                    target=target,
                )
            )
        for title, name, unit, higher in (
            ("OpenTelemetry: drain, untraced", "plain_jobs_per_s", "jobs/s", True),
            ("OpenTelemetry: drain, traced", "traced_jobs_per_s", "jobs/s", True),
            ("OpenTelemetry: pool CPU per job, untraced", "plain_cpu_us_per_job", "µs", False),
            ("OpenTelemetry: pool CPU per job, traced", "traced_cpu_us_per_job", "µs", False),
            ("OpenTelemetry: tracing's CPU per job", "tracing_cpu_us_per_job", "µs", False),
            ("OpenTelemetry: single enqueue in a span, untraced", "plain_enqueue_us", "µs", False),
            ("OpenTelemetry: single enqueue in a span, traced", "traced_enqueue_us", "µs", False),
        ):
            rows.append(Row("22", prefix + title, "otel_cost", name, unit, higher, backend=backend))
    for number, title, workload, name, unit, higher in (
        ("8", "SQLite: bulk enqueue", "bulk_enqueue", "jobs_per_s", "jobs/s", True),
        (
            "8",
            "SQLite: bulk enqueue of builders",
            "bulk_enqueue_builders",
            "jobs_per_s",
            "jobs/s",
            True,
        ),
        ("8", "SQLite: single enqueue", "single_enqueue", "jobs_per_s", "jobs/s", True),
        ("8", "SQLite: drain, 1 pool", "drain", "jobs_per_s", "jobs/s", True),
        (
            "8",
            "SQLite: drain CPU of the pool (Huey: its consumer, process workers)",
            "drain",
            "pool_cpu_s_per_1000_jobs",
            "s/1,000 jobs",
            False,
        ),
        ("8", "SQLite: drain, Huey's thread workers", "drain", "thread_jobs_per_s", "jobs/s", True),
        (
            "8",
            "SQLite: drain CPU, Huey's thread workers",
            "drain",
            "thread_pool_cpu_s_per_1000_jobs",
            "s/1,000 jobs",
            False,
        ),
        ("8", "SQLite: latency p50, pool in another process", "latency", "p50_ms", "ms", False),
        ("8", "SQLite: latency p99, pool in another process", "latency", "p99_ms", "ms", False),
        ("8", "SQLite: latency p50, in-process", "latency_inprocess", "p50_ms", "ms", False),
        ("8", "SQLite: latency p99, in-process", "latency_inprocess", "p99_ms", "ms", False),
    ):
        rows.append(Row(number, title, workload, name, unit, higher, backend="sqlite"))
    for name, title in (
        ("enqueue_statements_per_job", "enqueue statements"),
        ("claim_statements_per_job", "claim statements (Kickside claims 10 at a time)"),
        ("settle_statements_per_job", "settle statements"),
        ("statements_per_job", "statements, all phases"),
        ("rows_written_per_job", "rows written, all phases"),
        ("commits_per_job", "commits"),
        ("fsyncs_per_job_full", "fsyncs at FULL (writing commits)"),
    ):
        rows.append(
            Row(
                "26",
                f"SQLite work per job: {title}",
                "work_per_job",
                name,
                "per job",
                False,
                "sqlite",
            )
        )
    return rows


def _async_rows() -> list[Row]:
    """Issue 21's async figures: ``async def`` jobs on async executors (each peer's async
    worker at the same concurrency)."""
    drain = Row(
        "10", "async drain, 1 pool, concurrency 10", "async_drain", "jobs_per_s", "jobs/s", True
    )
    cpu = Row(
        "10",
        "async drain CPU (pool + PostgreSQL)",
        "async_drain",
        "cpu_s_per_1000_jobs",
        "CPU s/1000 jobs",
        False,
    )
    io = Row(
        "10b", "I/O-bound drain (10 ms sleeps), 200 slots", "io_drain", "jobs_per_s", "jobs/s", True
    )
    p50 = Row("10c", "async latency p50", "async_latency", "p50_ms", "ms", False)
    return [
        replace(drain, target=times_fastest_peer(2.0, drain)),
        replace(cpu, target=at_most_peer("pgqueuer", cpu)),
        replace(io, target=times_fastest_peer(1.0, io)),
        Row(
            "10b",
            "I/O-bound drain, share of the Little's-law limit (20,000/s)",
            "io_drain",
            "limit_fraction",
            "share",
            True,
            target=lambda _doc, mine: ("≥ 60%", "", None if mine is None else mine >= 0.6),
        ),
        replace(p50, target=within_fastest_peer(0.75, p50)),
        Row(
            "10c",
            "async latency p99",
            "async_latency",
            "p99_ms",
            "ms",
            False,
            target=at_most(20, " ms"),
        ),
        Row("10", "SQLite: async drain", "async_drain", "jobs_per_s", "jobs/s", True, "sqlite"),
        Row("10b", "SQLite: I/O-bound drain", "io_drain", "jobs_per_s", "jobs/s", True, "sqlite"),
        Row(
            "10b",
            "SQLite: I/O-bound drain, share of the limit",
            "io_drain",
            "limit_fraction",
            "share",
            True,
            "sqlite",
        ),
    ]


ROWS: tuple[Row, ...] = tuple(_rows())

#: Baselines shown in the table: (key in ``baselines``, title).
BASELINES = (
    ("pgbench_insert", "pgbench: single-row INSERT, 1 client (reference for 2)"),
    ("psycopg_insert", "psycopg from Python: the same single-row INSERT, 1 client"),
    ("pgbench_enqueue", "pgbench: Kickside's single-enqueue statement, 1 client (ceiling for 2)"),
    ("pgbench_update", "pgbench: simple-update (-N), 10 clients"),
    (
        "sqlite_enqueue",
        "SQLite: Kickside's single-enqueue statement on sqlite3, nothing else (ceiling for 8)",
    ),
)


def fmt(value: float | None, unit: str) -> str:
    """A figure in its unit's usual precision."""
    if value is None:
        return "—"
    if unit in ("jobs/s", "tx/s", "µs/job", "µs", "MB", "count"):
        return f"{value:,.0f}"
    if unit == "ms":
        return f"{value:.1f}"
    if unit == "share":
        return f"{value:.0%}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "per job":
        return f"{value:.2f}"
    return f"{value:.3f}"


def workload_table(doc: Doc) -> list[str]:
    """The table: one line per figure measured, with peers, ratios and targets."""
    others = peers(doc)
    versions = doc.get("versions", {})
    names = [f"{p} {versions[p]}" if versions.get(p) else p for p in others]
    smoke = doc.get("quick", False)
    header = (
        ["#", "workload", "unit", "kickside", *names]
        + [f"kickside/{p}" for p in others]
        + ["target (kickside)", "measured", "smoke: met?" if smoke else "met"]
    )
    lines = ["| " + " | ".join(header) + " |"]
    lines.append(
        "| "
        + " | ".join(
            ["---", "---", "---"] + ["---:"] * (len(header) - 6) + ["---", "---:", ":---:"]
        )
        + " |"
    )
    for row in ROWS:
        mine = row.value(doc, KICKSIDE)
        theirs = [row.value(doc, p) for p in others]  # a peer has figures on its backend only
        if mine is None and all(v is None for v in theirs):
            continue
        arrow = "↑" if row.higher_is_better else "↓"
        ratios = ["—" if not mine or not v else f"{mine / v:.2f}x" for v in theirs]
        wanted, measured, met = row.target(doc, mine) if row.target else ("", "", None)
        verdict = "" if not row.target else "—" if met is None else "pass" if met else "MISS"
        cells = [
            row.number,
            row.label(doc),
            f"{row.unit} {arrow}",
            fmt(mine, row.unit),
            *[fmt(v, row.unit) for v in theirs],
            *ratios,
            wanted,
            measured,
            verdict,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    blanks = [""] * (len(others) * 2 + 3)
    for key, title in BASELINES:
        base = doc.get("baselines", {}).get(key)
        if base:
            shown = (
                fmt(base.get("tps"), "tx/s") if base.get("tps") else f"n/a: {base.get('reason')}"
            )
            lines.append("| " + " | ".join(["ref", title, "tx/s ↑", shown, *blanks]) + " |")
    return lines


def sqlite_durability_note(doc: Doc) -> list[str]:
    """Which SQLite durability mode each system ran at, when a SQLite peer (Huey) ran."""
    modes = {
        e["system"]: e["details"].get("synchronous")
        for e in doc["results"]
        if e["system"] != KICKSIDE and e["backend"] == "sqlite" and e["details"].get("synchronous")
    }
    if not modes:
        return []
    mine = doc.get("sqlite_synchronous")
    shown = [f"kickside {mine.upper() if mine else '—'}"]
    shown += [f"{system} {mode}" for system, mode in sorted(modes.items())]
    return [
        "SQLite durability (WAL, `synchronous`): "
        + ", ".join(shown)
        + ". FULL fsyncs every commit (survives an OS crash and a power loss; Huey's "
        "default); NORMAL does not (survives a process crash; Kickside's default). "
        "`--sqlite-synchronous full` runs Kickside at FULL."
    ]


def single_enqueue_note(doc: Doc) -> list[str]:
    """Kickside's single enqueue as a share of both pgbench one-client rates: the trivial
    INSERT (the target's reference) and Kickside's own statement (the ceiling for its row)."""
    mine = metric(find(doc["results"], KICKSIDE, "postgresql", "single_enqueue"), "jobs_per_s")
    if mine is None:
        return []
    shares = []
    for key, what, aside in (
        ("pgbench_insert", "of pgbench's trivial insert", ""),
        (
            "pgbench_enqueue",
            "of pgbench running Kickside's own statement",
            ", the ceiling for this row",
        ),
    ):
        tps = (doc.get("baselines", {}).get(key) or {}).get("tps")
        if tps:
            shares.append(f"{mine / tps:.0%} {what} ({tps:,.0f}/s{aside})")
    if not shares:
        return []
    lines = [f"Single enqueue: kickside {mine:,.0f}/s = {', '.join(shares)}."]
    trivial, from_python = (
        (doc.get("baselines", {}).get(key) or {}).get("tps")
        for key in ("pgbench_insert", "psycopg_insert")
    )
    if trivial and from_python:
        lines.append(
            f"psycopg sending pgbench's trivial insert from Python reaches {from_python:,.0f}/s, "
            f"{from_python / trivial:.0%} of pgbench's rate: what any Python client gets for "
            "the simplest row on this server."
        )
    return lines


def sqlite_single_enqueue_note(doc: Doc) -> list[str]:
    """SQLite's single enqueue against its ceiling (Kickside's own statement on sqlite3 with no
    Python around it) and against each Huey at the same durability: how much of the line the
    row itself leaves."""
    ceiling = doc.get("baselines", {}).get("sqlite_enqueue") or {}
    tps, mode = ceiling.get("tps"), ceiling.get("synchronous")
    mine = metric(find(doc["results"], KICKSIDE, "sqlite", "single_enqueue"), "jobs_per_s")
    if not tps or not mode:
        return []
    line = f"SQLite single enqueue at {mode.upper()}: Kickside's statement alone, on sqlite3, "
    line += f"{tps:,.0f}/s ({1e6 / tps:.1f} µs a row)"
    if mine:
        line += f"; kickside {mine:,.0f}/s, {mine / tps:.0%} of it"
    for entry in doc["results"]:
        same = (entry["details"] or {}).get("synchronous", "").lower() == mode.lower()
        theirs = metric(entry, "jobs_per_s") if entry["workload"] == "single_enqueue" else None
        if entry["system"] != KICKSIDE and entry["backend"] == "sqlite" and same and theirs:
            line += (
                f"; {entry['system']} (same durability) {theirs:,.0f}/s: the statement alone is "
                f"{tps / theirs:.2f}x its whole enqueue"
            )
    return [line + "."]


def dashboard_note(doc: Doc) -> list[str]:
    """Workload 7 view by view: median, p95 and max of the timed refreshes, and which of them
    the target is judged on."""
    entry = find(doc["results"], KICKSIDE, "postgresql", "dashboard")
    found = spreads(entry.get("runs", [])) if entry is not None else {}
    if entry is None or not found:
        return []
    rounds = max(s.samples for s in found.values())
    jobs = entry.get("params", {}).get("jobs")
    view, slowest = max(found.items(), key=lambda item: item[1].max)
    verdict = "within" if slowest.max <= TARGET_MS else "over"
    lines = [
        f"Dashboard refreshes{f' over {jobs:,} jobs' if jobs else ''}, ms, {rounds} timed "
        f"refreshes per view after one untimed warm-up. The target (every refresh under "
        f"{TARGET_MS:g} ms) is judged on the max, not the median: the warm-up is the only cold "
        f"refresh and is not among them. Slowest single refresh: {slowest.max:.1f} ms "
        f"({view}), {verdict} the target.",
        "",
        "| view | median | p95 | max |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {name} | {s.median:.1f} | {s.p95:.1f} | {s.max:.1f} |" for name, s in found.items()
    ]
    return lines
