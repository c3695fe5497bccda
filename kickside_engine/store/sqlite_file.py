"""The file behind a SQLite URL: checked before SQLite opens it, so a bad path gets one clear line.

SQLite itself answers a wrong path with ``unable to open database file`` or ``file is not a
database`` at the first statement, and quietly creates a file (and Kickside its folder) for a
mistyped one. :func:`check_sqlite_file` says instead which path is wrong and how, as a
:class:`ConfigurationError` (exit 2), and creates nothing unless asked to.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL

from kickside_engine.errors import ConfigurationError

#: The first 16 bytes of every SQLite database file (an empty file is an empty database too).
SQLITE_HEADER = b"SQLite format 3\x00"


def is_uri_filename(url: URL) -> bool:
    """``sqlite:///file:PATH?mode=ro&uri=true``: SQLite opens it; there is no folder to make."""
    return str(url.query.get("uri", "")).lower() in ("true", "1")


def sqlite_path(url: URL) -> Path | None:
    """The file a SQLite URL names (for ``file:`` URIs too), or None when it names none."""
    database = url.database or ""
    if is_uri_filename(url):
        database = database.removeprefix("file:")
        if database.startswith("//"):  # file://HOST/PATH: only a local host is allowed
            database = "/" + database[2:].partition("/")[2]
        database = database.partition("?")[0]
    if database in ("", ":memory:"):
        return None
    return Path(database).expanduser()


def check_sqlite_file(url: URL, *, create: bool) -> None:
    """Refuse a SQLite URL whose file cannot be Kickside's database, naming the path and why.

    ``create``: a missing file (and its folder) may be created, as SQLite does on first use;
    otherwise a missing file is an error, so a mistyped path is not mistaken for an empty
    database. A ``mode=ro`` URI never creates anything.
    """
    path = sqlite_path(url)
    if path is None:
        return
    read_only = str(url.query.get("mode", "")).lower() == "ro"
    try:
        if path.is_dir():
            raise ConfigurationError(f"SQLite database {path} is a directory, not a file")
        if not path.exists():
            if not create or read_only:
                raise ConfigurationError(
                    f"SQLite database {path} does not exist: check the path "
                    "(`kickside migrate` creates the file)"
                )
            if not is_uri_filename(url):
                _make_folder(path)
            return
        with path.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except PermissionError:
        raise ConfigurationError(
            f"SQLite database {path}: permission denied (this user cannot read it or its folder)"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"SQLite database {path}: {exc.strerror or exc}") from None
    if header and header != SQLITE_HEADER:
        raise ConfigurationError(f"{path} is not a SQLite database (it holds something else)")


def _make_folder(path: Path) -> None:
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigurationError(
            f"cannot create SQLite database {path}: {folder} (or a folder above it) is a file"
        ) from None
    except NotADirectoryError:
        raise ConfigurationError(
            f"cannot create SQLite database {path}: a part of {folder} is a file, not a folder"
        ) from None
    except PermissionError:
        raise ConfigurationError(
            f"cannot create SQLite database {path}: permission denied for its folder {folder}"
        ) from None
