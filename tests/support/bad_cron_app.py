"""An application whose schedule has a bad expression: importing it fails, naming the entry."""

from __future__ import annotations

from kickside_engine import JobBuilder
from kickside_engine.plugins.cron import Recurring
from tests.support.pool_app import registry

__all__ = ["SCHEDULE", "registry"]

SCHEDULE = [Recurring("broken", "61 * * * *", lambda: JobBuilder("noop", {}))]
