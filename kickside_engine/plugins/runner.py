"""The plugin loop's body: one tick runs every plugin in turn, each isolated from the others.

The worker pool calls :meth:`PluginSet.tick` every second on every node. There is no leader
election: every plugin is idempotent and safe to run on many nodes at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from kickside_engine.clock import ensure_aware
from kickside_engine.execution import describe_exception
from kickside_engine.plugins.cron import CronFire, Recurring, cron_tick
from kickside_engine.plugins.lifeline import RescueResult, rescue_expired
from kickside_engine.plugins.pruner import (
    DEFAULT_MAX_AGE,
    prune,
    prune_rate_windows,
    prune_recurring_executions,
)
from kickside_engine.plugins.stager import stage
from kickside_engine.redact import redact_text
from kickside_engine.store.database import Database
from kickside_engine.store.driver_errors import unavailable_reason

log = logging.getLogger("kickside.plugins")
T = TypeVar("T")


@dataclass
class PluginTickReport:
    """What one tick did.

    A plugin that failed has no result (None) and its redacted error in ``errors``, keyed by
    plugin name.
    """

    staged: int | None = None
    rescue: RescueResult | None = None
    pruned: int | None = None
    recurring_pruned: int | None = None
    rate_windows_pruned: int | None = None
    fired: list[CronFire] | None = None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass
class PluginSet:
    """The plugins a pool runs: the Stager, Lifeline, Pruner and Cron (with its schedule)."""

    schedule: Sequence[Recurring] = ()
    prune_after: timedelta = DEFAULT_MAX_AGE
    #: Every how many ticks the Stager also sweeps for workflow jobs that a settle by older
    #: code left waiting (a safety net for rolling upgrades: it reads every unresolved
    #: dependency, so not every second).
    sweep_every: int = 10
    _ticks: int = field(default=0, repr=False)

    def tick(self, db: Database, now: datetime) -> PluginTickReport:
        """Run stage, rescue_expired, prune, prune_recurring_executions, prune_rate_windows and
        cron_tick at ``now``.

        An exception in one plugin is logged at error level and recorded in the report; the
        others still run. A database that cannot be reached (see
        :func:`~kickside_engine.store.driver_errors.unavailable_reason`) ends the tick instead: the
        exception propagates, unlogged, for the caller to back off (the next plugins could not
        reach the database either, and one line per plugin per tick would flood the log).
        """
        now = ensure_aware(now, "now")
        report = PluginTickReport()

        def run(name: str, plugin: Callable[[], T]) -> T | None:
            try:
                return plugin()
            except Exception as exc:
                if unavailable_reason(exc) is not None:
                    raise
                error = redact_text(describe_exception(exc))
                report.errors[name] = error
                log.error("plugin %s failed: %s", name, error, extra={"plugin": name})
                return None

        sweep = self._ticks % self.sweep_every == 0
        self._ticks += 1
        report.staged = run("stager", lambda: stage(db, now, sweep=sweep))
        report.rescue = run("lifeline", lambda: rescue_expired(db, now))
        report.pruned = run("pruner", lambda: prune(db, now, max_age=self.prune_after))
        report.recurring_pruned = run(
            "recurring_pruner", lambda: prune_recurring_executions(db, now)
        )
        report.rate_windows_pruned = run("rate_window_pruner", lambda: prune_rate_windows(db, now))
        report.fired = run("cron", lambda: cron_tick(db, self.schedule, now))
        return report
