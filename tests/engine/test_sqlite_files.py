"""A SQLite URL that names no usable file gets a Kickside error naming the path and the problem.

SQLite-only by nature: PostgreSQL URLs name no file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kickside_engine import ConfigurationError, connect_database, migrate


def _refused(url: str, match: str, *, create: bool = True) -> ConfigurationError:
    with pytest.raises(ConfigurationError, match=match) as info:
        db = connect_database(url, create=create)
        try:
            migrate.upgrade(db)
        finally:
            db.dispose()
    assert "\n" not in str(info.value)
    return info.value


def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    error = _refused(f"sqlite:///{tmp_path}", "is a directory")
    assert str(tmp_path) in str(error)


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\n" * 100)
    error = _refused(f"sqlite:///{notes}", "not a SQLite database")
    assert str(notes) in str(error)
    assert notes.read_text() == "shopping list\n" * 100


def test_a_folder_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    error = _refused(f"sqlite:///{tmp_path}/file/sub/k.sqlite3", "cannot create")
    assert str(tmp_path / "file") in str(error)


def test_a_missing_file_is_refused_without_creating_anything_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "typo" / "k.sqlite3"
    error = _refused(f"sqlite:///{path}", "does not exist", create=False)
    assert str(path) in str(error)
    assert not (tmp_path / "typo").exists()
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"  # SQLite would say "unable to open"
    _refused(read_only, "does not exist")
    assert not (tmp_path / "typo").exists()


def test_by_default_a_missing_file_and_its_folders_are_created(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "k.sqlite3"
    db = connect_database(f"sqlite:///{path}")
    try:
        assert migrate.upgrade(db).up_to_date
    finally:
        db.dispose()
    assert path.is_file()
