"""The demo's own database: where it lives, and refusing any database that is not the demo's.

``kickside demo`` fills a database with fake jobs, pauses a queue and sets capacity limits. An
application's database must never receive any of that, so the demo runs on a file of its own,
``kickside-demo.sqlite3`` beside the embedded default file (never the default file itself,
which applications use), and refuses any database holding something that does not go by the
demo's names (:data:`~kickside_tui.demo.workload.OWNERSHIP`): an application's jobs, queues,
settings, nodes, cron runs or tables.
"""

from __future__ import annotations

from pathlib import Path

from kickside_engine import ConfigurationError, ConflictError, Database
from kickside_engine.config import default_sqlite_path
from kickside_engine.control import delete_owned, foreign_rows, list_nodes, utcnow
from kickside_tui.demo.marker import filled_by_demo
from kickside_tui.demo.workload import OWNERSHIP

FILE_NAME = "kickside-demo.sqlite3"


def default_path() -> Path:
    """The demo's own database file, beside the embedded default file (``KICKSIDE_HOME``)."""
    return default_sqlite_path().with_name(FILE_NAME)


def default_url() -> str:
    """``sqlite:///`` URL of :func:`default_path`."""
    return f"sqlite:///{default_path()}"


def describe(db: Database) -> str:
    """The database as messages name it: its URL (password masked) and schema."""
    where = db.display_url()
    return f"{where} schema {db.schema}" if db.schema else where


def foreign_data(db: Database) -> list[str]:
    """What ``db`` holds that is not the demo's, one phrase per kind (empty: the demo's own).

    Nothing is written. Audit entries about jobs (not judged by name: the job may be gone) are
    the demo's only in a database the demo marked; operators act on demo jobs from its
    dashboard, but a database with such history and no mark is someone else's.
    """
    found = foreign_rows(db, OWNERSHIP)
    phrases = [rows.describe() for rows in found.foreign]
    if found.other_audit_entries and not filled_by_demo(db):
        count = found.other_audit_entries
        phrases.append(f"{count} audit {'entry' if count == 1 else 'entries'} about jobs")
    return phrases


def not_the_demos(db: Database, verb: str, found: list[str], hint: str = "") -> ConfigurationError:
    """The one-line refusal to ``verb`` ``db``, naming what :func:`foreign_data` ``found``."""
    return ConfigurationError(
        f"refusing to {verb} {describe(db)}: it holds data that is not the demo's: "
        f"{'; '.join(found)}{hint}"
    )


def reset(db: Database) -> dict[str, int]:
    """Empty the demo's database (a migrated one); counts of deleted rows per kind.

    Refused on a database that holds anything not the demo's, and while a pool runs on it
    (its leases would vanish under it): stop that demo first.
    """
    found = foreign_data(db)
    if found:
        raise not_the_demos(db, "reset", found)
    running = [node.name for node in list_nodes(db, utcnow()) if not node.stale]
    if running:
        raise ConflictError(
            f"refusing to reset {describe(db)}: a demo pool is running on it "
            f"({', '.join(running)}); stop it first"
        )
    return delete_owned(db, OWNERSHIP)
