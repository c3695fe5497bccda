"""The mark `kickside demo` leaves in the database it fills.

A cron schedule lives in the application's code, not in the database: the engine records only
the runs that fired (key, time, job), never an entry's expression, so a dashboard opened with no
``--schedule`` cannot know an application's entries. The demo's can be known. The demo writes
this setting when it starts, and ``kickside-tui`` given no ``--schedule`` shows the demo's
schedule over a database that carries it (and only then). The mark also tells
:mod:`kickside_tui.demo.database` that audit entries about jobs there are the demo's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from kickside_engine import Database
from kickside_engine.control import Actor
from kickside_engine.settings import get_settings, set_setting

NAMESPACE = "kickside.demo"
KEY = "workload"


def mark(db: Database, cron_keys: Sequence[str], actor: Actor, now: datetime) -> None:
    """Record that the demo fills ``db`` (and which cron entries it runs)."""
    set_setting(db, NAMESPACE, KEY, {"cron": list(cron_keys)}, updated_by=actor.user, now=now)


def filled_by_demo(db: Database) -> bool:
    """Whether ``kickside demo`` has run on ``db``."""
    return any(setting.key == KEY for setting in get_settings(db, NAMESPACE))
