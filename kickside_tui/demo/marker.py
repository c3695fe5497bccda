"""The mark `kickside demo` leaves in the database it fills.

Running pools publish their cron schedule on their heartbeat, so the dashboard and ``kickside
cron`` show the demo's entries while the demo runs. Once it stops no node publishes them, and
the runs it fired stay in the database without their entries. The demo writes this setting when
it starts, and ``kickside-tui`` given no ``--schedule`` (and ``kickside cron`` without
``--app``) shows the demo's schedule over a database that carries it when no running node
publishes one (and only then: the embedded default file may hold an application's jobs as well
as the demo's). The mark also tells :mod:`kickside_tui.demo.database` that audit entries about
jobs there are the demo's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from kickside_engine import Database
from kickside_engine.control import Actor, get_settings, set_setting

NAMESPACE = "kickside.demo"
KEY = "workload"


def mark(db: Database, cron_keys: Sequence[str], actor: Actor, now: datetime) -> None:
    """Record that the demo fills ``db`` (and which cron entries it runs)."""
    set_setting(db, NAMESPACE, KEY, {"cron": list(cron_keys)}, updated_by=actor.user, now=now)


def filled_by_demo(db: Database) -> bool:
    """Whether ``kickside demo`` has run on ``db``."""
    return any(setting.key == KEY for setting in get_settings(db, NAMESPACE))
