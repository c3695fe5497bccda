"""The soak's table and verdict: is throughput steady, memory flat, the job table bounded?

Only *saturated* intervals count (work waiting at both ends, so the pools were never idle):
their first and last thirds are compared.

- **throughput steady**: the last third's median jobs/s is at least ``MIN_THROUGHPUT_RATIO`` of
  the first third's (a decay as history grows would show here; medians, because a busy machine
  makes single intervals noisy; a warning says when the load average rose meanwhile);
- **memory flat**: for each process, the median RSS of the last third exceeds the middle
  third's by at most ``MAX_RSS_GROWTH`` of it or ``RSS_SLACK_MB``, whichever is larger. A leak
  grows with the jobs processed, so it shows between any two thirds; warming up (the dashboard's
  first views and caches, the allocator's arenas) happens in the first third, and a default
  two-minute soak compared against it read warm-up as growth (dashboard 95 -> 105 MB, then flat
  within 1 MB a minute in a seven-minute run);
- **table bounded**: the finished jobs the table retains (its rows less the waiting and
  executing ones, which the feeder's backlog swings by thousands) have a median in the last third
  at most ``MAX_ROWS_GROWTH`` times the middle third's plus ``ROWS_SLACK``, and the Pruner did
  delete jobs. A table the Pruner does not keep bounded grows with the jobs run: its median grows
  by two thirds from the middle third to the last. Medians, because a single sample taken while
  a Pruner round or a vacuum is late stands thousands of rows above its neighbours. Judged only
  when the saturated phase lasted at least three retention periods.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

MIN_THROUGHPUT_RATIO = 0.8
MAX_RSS_GROWTH = 0.10
RSS_SLACK_MB = 8.0
MAX_ROWS_GROWTH = 1.2
ROWS_SLACK = 500
MIN_SATURATED = 6
LOAD_CHANGE = 1.25

Sample = dict[str, Any]


def _thirds(items: Sequence[Sample]) -> tuple[list[Sample], list[Sample], list[Sample]]:
    third = len(items) // 3
    return list(items[:third]), list(items[third : 2 * third]), list(items[-third:])


def rss_keys(samples: Sequence[Sample]) -> list[str]:
    """The per-process RSS columns the samples carry (``rss_mb.<process>``)."""
    return sorted({k for s in samples for k in s["rss_mb"]})


def retained_rows(sample: Sample) -> int:
    """The finished jobs the table held at ``sample`` (what the Pruner keeps bounded)."""
    if "retained_rows" in sample:
        return int(sample["retained_rows"])
    # Records from before the soak counted them: every job it runs is waiting, executing or
    # finished (no-op jobs neither retry nor wait on a schedule).
    return int(sample["job_rows"] - sample["backlog"] - sample.get("executing", 0))


def verdict(samples: Sequence[Sample], *, retention_s: float, pruned: int) -> dict[str, Any]:
    """Judge the run; each criterion has ``ok`` True, False or None (cannot judge)."""
    steady = [s for s in samples if s["saturated"]]
    result: dict[str, Any] = {"saturated_samples": len(steady)}
    if len(steady) < MIN_SATURATED:
        result.update(ok=None, reason=f"fewer than {MIN_SATURATED} saturated samples: too short")
        return result
    first, middle, last = _thirds(steady)
    tp_first = statistics.median(s["jobs_per_s"] for s in first)
    tp_last = statistics.median(s["jobs_per_s"] for s in last)
    ratio = tp_last / tp_first if tp_first else 0.0
    load_first = statistics.fmean(s["load_1m"] for s in first)
    load_last = statistics.fmean(s["load_1m"] for s in last)
    result["throughput"] = {
        "first_jobs_per_s": round(tp_first, 1),
        "last_jobs_per_s": round(tp_last, 1),
        "ratio": round(ratio, 3),
        "first_load_1m": round(load_first, 2),
        "last_load_1m": round(load_last, 2),
        "ok": ratio >= MIN_THROUGHPUT_RATIO,
    }
    if load_last > LOAD_CHANGE * max(load_first, 1.0):
        result["throughput"]["warning"] = (
            f"the machine got busier (load {load_first:.1f} -> {load_last:.1f}): "
            "a throughput drop may not be Kickside's"
        )
    memory: dict[str, Any] = {}
    for key in rss_keys(steady):
        before = statistics.median(s["rss_mb"].get(key, 0.0) for s in middle)
        after = statistics.median(s["rss_mb"].get(key, 0.0) for s in last)
        allowed = max(before * MAX_RSS_GROWTH, RSS_SLACK_MB)
        memory[key] = {
            "middle_mb": round(before, 1),
            "last_mb": round(after, 1),
            "growth_mb": round(after - before, 1),
            "ok": after - before <= allowed,
        }
    result["memory"] = {"processes": memory, "ok": all(m["ok"] for m in memory.values())}
    span = steady[-1]["t_s"] - steady[0]["t_s"]
    rows_middle = statistics.median(retained_rows(s) for s in middle)
    rows_last = statistics.median(retained_rows(s) for s in last)
    table: dict[str, Any] = {
        "middle_median_retained": round(rows_middle),
        "last_median_retained": round(rows_last),
        "last_max_retained": max(retained_rows(s) for s in last),
        "pruned": pruned,
    }
    if span < 3 * retention_s:
        table.update(ok=None, reason=f"saturated for {span:.0f}s < 3 x retention {retention_s:g}s")
    else:
        table["ok"] = pruned > 0 and rows_last <= MAX_ROWS_GROWTH * rows_middle + ROWS_SLACK
    result["table"] = table
    checks = [result["throughput"]["ok"], result["memory"]["ok"], table["ok"]]
    result["ok"] = None if None in checks else all(checks)
    return result


def _word(ok: bool | None, good: str, bad: str) -> str:
    return "n/a" if ok is None else good if ok else bad.upper()


def verdict_lines(result: dict[str, Any]) -> list[str]:
    """The verdict in a few lines of text."""
    if "throughput" not in result:
        return [f"verdict: cannot judge ({result.get('reason')})"]
    tp, mem, table = result["throughput"], result["memory"], result["table"]
    lines = [
        f"throughput {_word(tp['ok'], 'steady', 'decayed')}: first third "
        f"{tp['first_jobs_per_s']} jobs/s, last third {tp['last_jobs_per_s']} "
        f"(x{tp['ratio']})" + (f"; {tp['warning']}" if tp.get("warning") else ""),
        f"memory {_word(mem['ok'], 'flat', 'growing')}: middle third to last third, "
        + ", ".join(
            f"{k} {m['middle_mb']}->{m['last_mb']} MB" for k, m in mem["processes"].items()
        ),
        f"table {_word(table['ok'], 'bounded', 'growing')}: finished rows retained, median of "
        f"the middle third {table['middle_median_retained']}, of the last third "
        f"{table['last_median_retained']} (max {table['last_max_retained']}), pruned "
        f"{table['pruned']}" + (f" ({table['reason']})" if table.get("reason") else ""),
    ]
    overall = result["ok"]
    lines.append(
        "verdict: "
        + (
            "throughput steady, memory flat, table bounded"
            if overall
            else "cannot judge every criterion"
            if overall is None
            else "FAILED (see above)"
        )
    )
    return lines


def table_lines(samples: Sequence[Sample]) -> list[str]:
    """The samples as a table: a header, then one line per sample."""
    keys = rss_keys(samples)
    return [header_line(keys), *(sample_line(s, keys) for s in samples)]


def header_line(keys: Sequence[str]) -> str:
    """The table's header, with one RSS column per process in ``keys``."""
    rss = " ".join(f"{k:>11}" for k in keys)
    return (
        f"{'t_s':>6} {'jobs/s':>8} {'finished':>9} {'backlog':>8} {'job_rows':>9} {rss}  (RSS MB)"
    )


def sample_line(s: Sample, keys: Sequence[str]) -> str:
    """One sample as a table row (``*`` marks an interval that was not saturated)."""
    mark = " " if s["saturated"] else "*"
    rss = " ".join(f"{s['rss_mb'].get(k, 0.0):>11.1f}" for k in keys)
    return (
        f"{s['t_s']:>6.0f} {s['jobs_per_s']:>7.0f}{mark} {s['finished']:>9} "
        f"{s['backlog']:>8} {s['job_rows']:>9} {rss}"
    )
