"""The soak's verdict (``bench/soak_report.py``) on made-up samples: each criterion can fail."""

from __future__ import annotations

from typing import Any

from bench.soak_report import verdict, verdict_lines

RETENTION_S = 5.0


def _samples(
    n: int = 30,
    *,
    jobs_per_s: Any = lambda i: 4000.0,
    retained: Any = lambda i: 20_000,
    dashboard_mb: Any = lambda i: 100.0,
) -> list[dict[str, Any]]:
    return [
        {
            "t_s": 10.0 * (i + 1),
            "jobs_per_s": jobs_per_s(i),
            "backlog": 10_000 + 5_000 * (i % 2),  # the feeder's swings
            "executing": 20,
            "job_rows": retained(i) + 10_000 + 5_000 * (i % 2) + 20,
            "retained_rows": retained(i),
            "rss_mb": {"pool1": 66.0, "dashboard": dashboard_mb(i)},
            "load_1m": 2.0,
            "saturated": True,
        }
        for i in range(n)
    ]


def _judge(samples: list[dict[str, Any]]) -> dict[str, Any]:
    result = verdict(samples, retention_s=RETENTION_S, pruned=100_000)
    assert verdict_lines(result)[-1].startswith("verdict: ")
    return result


def test_a_steady_flat_bounded_run_passes_despite_one_late_prune() -> None:
    result = _judge(_samples(retained=lambda i: 45_000 if i == 28 else 20_000 + 100 * (i % 3)))
    assert result["ok"] is True
    assert result["table"]["last_max_retained"] == 45_000


def test_a_table_the_pruner_lets_grow_fails() -> None:
    result = _judge(_samples(retained=lambda i: 5_000 + 1_000 * i))
    assert result["table"]["ok"] is False and result["ok"] is False


def test_the_backlog_swinging_is_not_growth() -> None:
    samples = _samples()
    for i, s in enumerate(samples):  # the feeder fills up more towards the end
        s["backlog"] += 300 * i
        s["job_rows"] += 300 * i
    assert _judge(samples)["table"]["ok"] is True


def test_records_without_retained_rows_count_them_from_the_states() -> None:
    samples = _samples(retained=lambda i: 5_000 + 1_000 * i)
    for s in samples:
        del s["retained_rows"]
    assert _judge(samples)["table"]["ok"] is False


def test_decaying_throughput_fails() -> None:
    result = _judge(_samples(jobs_per_s=lambda i: 6000.0 - 150.0 * i))
    assert result["throughput"]["ok"] is False and result["ok"] is False


def test_growing_memory_fails() -> None:
    result = _judge(_samples(dashboard_mb=lambda i: 100.0 + 2.0 * i))
    assert result["memory"]["processes"]["dashboard"]["ok"] is False
    assert result["memory"]["processes"]["pool1"]["ok"] is True
    assert result["ok"] is False


def test_warming_up_in_the_first_third_is_not_growth() -> None:
    # The dashboard builds its views and caches early (95 -> 105 MB in a real two-minute soak).
    result = _judge(_samples(dashboard_mb=lambda i: 80.0 + 25.0 * min(i, 8) / 8))
    assert result["memory"]["processes"]["dashboard"]["ok"] is True
    assert result["ok"] is True


def test_a_leak_is_growth_however_long_the_run() -> None:
    for n in (12, 30, 90):  # the same leak per sample, over short and long runs
        result = _judge(_samples(n, dashboard_mb=lambda i: 100.0 + 3.0 * i))
        assert result["memory"]["processes"]["dashboard"]["ok"] is False, n


def test_too_short_a_run_cannot_be_judged() -> None:
    assert _judge(_samples(n=4))["ok"] is None
    short = verdict(_samples(n=9), retention_s=60.0, pruned=1)
    assert short["table"]["ok"] is None and short["ok"] is None
