"""Prometheus metrics for a worker pool, built on its lifecycle hooks (``kickside worker
--metrics-port 9464``; install ``kickside[metrics]``).

The pool's hooks feed counters and histograms labelled by queue, worker and outcome; queue
depth and the oldest due job's age are read from the database when a scrape asks (at most
once per ``refresh_seconds``, so a scrape storm never becomes a query storm). Everything is
the supervisor's: executors are not instrumented, so one endpoint serves one pool whatever its
executors, and metrics survive their replacement.

Exported (each ``kickside_`` prefixed):

- ``jobs_started_total{queue,worker}``, ``jobs_finished_total{queue,worker,outcome}``;
- ``job_duration_seconds{queue,worker,outcome}`` and ``job_queue_wait_seconds{queue,worker}``
  (from when the job was due to when it started), histograms;
- ``jobs_discarded_total{queue,worker}``, ``jobs_rescued_total{queue,worker}`` (by this
  pool's Lifeline);
- ``queue_available_jobs{queue}`` and ``queue_oldest_available_age_seconds{queue}``: due jobs
  waiting, across every node.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kickside_engine.clock import utcnow
from kickside_engine.errors import ConfigurationError
from kickside_engine.hooks import Discarded, Rescued, Stopped
from kickside_engine.models import Job
from kickside_engine.redact import redact_text

try:
    from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
    from prometheus_client.core import GaugeMetricFamily
except ImportError:  # pragma: no cover - the extra is not installed
    raise ConfigurationError(
        "Prometheus metrics need prometheus_client, which the metrics extra installs: "
        "pip install 'kickside[metrics]'"
    ) from None

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from kickside_engine.runtime.pool import WorkerPool
    from kickside_engine.store.database import Database

log = logging.getLogger("kickside.metrics")
JOB_LABELS = ("queue", "worker")


class _Backlog:
    """The queue gauges, read from the database at scrape time (cached ``refresh_seconds``)."""

    def __init__(self, db: Database, refresh_seconds: float) -> None:
        self.db = db
        self.refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._found: dict[str, tuple[int, float]] = {}

    def describe(self) -> list[Any]:
        return []  # read only when scraped, never at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        found = self._current()
        depth = GaugeMetricFamily(
            "kickside_queue_available_jobs", "Due jobs waiting to run", labels=["queue"]
        )
        age = GaugeMetricFamily(
            "kickside_queue_oldest_available_age_seconds",
            "How long the oldest due job has waited",
            labels=["queue"],
        )
        for queue, (count, oldest) in sorted(found.items()):
            depth.add_metric([queue], count)
            age.add_metric([queue], oldest)
        yield depth
        yield age

    def _current(self) -> dict[str, tuple[int, float]]:
        from kickside_engine.control import queue_backlog

        with self._lock:
            if time.monotonic() - self._read_at >= self.refresh_seconds:
                try:
                    self._found = queue_backlog(self.db, utcnow())
                except Exception as exc:  # a scrape shows the last figures, never an error
                    log.warning("queue metrics not read: %s", redact_text(str(exc)))
                self._read_at = time.monotonic()
            return self._found


class PoolMetrics:
    """A pool's Prometheus metrics: :meth:`attach` them to a pool, :meth:`serve` them."""

    def __init__(
        self,
        db: Database,
        *,
        registry: CollectorRegistry | None = None,
        refresh_seconds: float = 5.0,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.started = Counter("kickside_jobs_started", "Jobs started", JOB_LABELS, registry=r)
        self.finished = Counter(
            "kickside_jobs_finished", "Attempts finished", (*JOB_LABELS, "outcome"), registry=r
        )
        self.duration = Histogram(
            "kickside_job_duration_seconds",
            "How long attempts ran",
            (*JOB_LABELS, "outcome"),
            registry=r,
        )
        self.wait = Histogram(
            "kickside_job_queue_wait_seconds",
            "How long jobs waited from due to started",
            JOB_LABELS,
            registry=r,
        )
        self.discarded = Counter(
            "kickside_jobs_discarded", "Jobs discarded", JOB_LABELS, registry=r
        )
        self.rescued = Counter(
            "kickside_jobs_rescued", "Expired leases rescued", JOB_LABELS, registry=r
        )
        r.register(_Backlog(db, refresh_seconds))
        self._server: WSGIServer | None = None

    def attach(self, pool: WorkerPool) -> None:
        """Count ``pool``'s jobs through its hooks (the application's registry is untouched)."""
        pool.hooks.add_hook("on_start", self._on_start)
        pool.hooks.add_hook("on_stop", self._on_stop)
        pool.hooks.add_hook("on_discard", self._on_discard)
        pool.hooks.add_hook("on_rescue", self._on_rescue)

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve ``/metrics`` on ``addr:port`` from a daemon thread; returns the port bound
        (``port=0`` picks a free one). A port in use is a :class:`ConfigurationError`."""
        try:
            server, _ = start_http_server(port, addr, registry=self.registry)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc}"
            ) from None
        self._server = server
        return int(server.server_address[1])

    def close(self) -> None:
        """Stop serving (the metrics stay readable from :attr:`registry`)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _on_start(self, job: Job) -> None:
        self.started.labels(job.queue, job.worker).inc()
        waited = (utcnow() - job.scheduled_at).total_seconds()
        self.wait.labels(job.queue, job.worker).observe(max(0.0, waited))

    def _on_stop(self, stopped: Stopped) -> None:
        job = stopped.job
        self.finished.labels(job.queue, job.worker, stopped.outcome).inc()
        seconds = stopped.duration_ms / 1000
        self.duration.labels(job.queue, job.worker, stopped.outcome).observe(seconds)

    def _on_discard(self, event: Discarded) -> None:
        self.discarded.labels(event.queue, event.worker).inc()

    def _on_rescue(self, event: Rescued) -> None:
        self.rescued.labels(event.queue, event.worker).inc()
