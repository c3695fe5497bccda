"""How durable a SQLite commit is: the ``synchronous`` mode, chosen per database URL.

Kickside runs SQLite in WAL mode; ``PRAGMA synchronous`` then decides when a commit reaches
the disk. What each mode keeps (SQLite's own documentation, https://sqlite.org/pragma.html#pragma_synchronous):

- ``normal`` (the default): a committed transaction survives a crash of any process (it is in
  the WAL file); an OS crash or a power loss can roll back the last commits before the next
  checkpoint, never corrupt the file. No fsync per commit.
- ``full``: also survives an OS crash and a power loss: every commit waits for an fsync of the
  WAL file (on this project's machine 5 ms per commit against 0.04 ms, so about 200 single
  commits a second per file).
- ``extra``: ``full``, and the directory is synced too (matters for the rollback journal only).
- ``off``: no fsync ever; an OS crash or power loss can corrupt the database. Tests only.

The mode comes from the URL's ``?synchronous=`` parameter, else ``KICKSIDE_SQLITE_SYNCHRONOUS``,
else ``normal``, and is applied to every connection Kickside's engine opens.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sqlalchemy.engine import URL

from kickside_engine.errors import ConfigurationError

#: The environment variable that sets the mode for URLs that do not.
SYNCHRONOUS_ENV = "KICKSIDE_SQLITE_SYNCHRONOUS"
#: The database URL query parameter that sets the mode (``sqlite:///app.db?synchronous=full``).
SYNCHRONOUS_PARAM = "synchronous"
#: The modes by their ``PRAGMA synchronous`` number.
SYNCHRONOUS_MODES = ("off", "normal", "full", "extra")
DEFAULT_SYNCHRONOUS = "normal"

#: What each mode keeps, in the words ``kickside doctor`` and the docs use.
KEEPS = {
    "off": "survives a process crash; an OS crash or power loss can corrupt the database",
    "normal": "survives a process crash; an OS crash or power loss can roll back the last "
    "commits (never corrupts)",
    "full": "survives a process crash, an OS crash and a power loss (an fsync per commit)",
    "extra": "survives a process crash, an OS crash and a power loss (an fsync per commit)",
}


def synchronous_mode(url: URL) -> str:
    """The mode for a SQLite URL: its ``?synchronous=``, else the environment, else normal.

    Raises :class:`ConfigurationError` naming the bad value and where it came from.
    """
    return synchronous_choice(url)[0]


def synchronous_choice(url: URL, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The mode for a SQLite URL and where it came from: ``url`` (its ``?synchronous=``),
    ``env`` (:data:`SYNCHRONOUS_ENV` in ``environ``, default ``os.environ``) or ``default``.

    Raises :class:`ConfigurationError` naming the bad value and where it came from.
    """
    environ = os.environ if environ is None else environ
    raw = url.query.get(SYNCHRONOUS_PARAM)
    where, source = "the database URL's ?synchronous=", "url"
    if raw is None or raw == "":
        raw, where, source = environ.get(SYNCHRONOUS_ENV, ""), SYNCHRONOUS_ENV, "env"
    if isinstance(raw, tuple):  # the parameter given twice
        raise ConfigurationError(
            f"{where} is given more than once: give one of off, normal, full, extra"
        )
    value = raw.strip().lower()
    if value == "":
        return DEFAULT_SYNCHRONOUS, "default"
    if value not in SYNCHRONOUS_MODES:
        raise ConfigurationError(
            f"invalid SQLite synchronous mode {raw!r} (from {where}): "
            "use off, normal, full or extra"
        )
    return value, source


def without_synchronous(url: URL) -> URL:
    """``url`` without Kickside's own parameter (SQLite itself would not know it)."""
    return url.difference_update_query([SYNCHRONOUS_PARAM])


def mode_name(number: int) -> str:
    """The mode's name from ``PRAGMA synchronous``'s number."""
    return SYNCHRONOUS_MODES[number] if 0 <= number < len(SYNCHRONOUS_MODES) else str(number)
