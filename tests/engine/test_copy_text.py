"""COPY text values: what PostgreSQL's text format needs for each type Kickside writes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from kickside_engine.store.copy_text import copy_text, escape


def test_each_type_as_copy_reads_it() -> None:
    assert copy_text(None) == "\\N"
    assert (copy_text(True), copy_text(False)) == ("t", "f")
    assert copy_text(-42) == "-42"
    u = uuid.UUID("0190f2b4-6b8c-7abc-8def-0123456789ab")
    assert copy_text(u) == "0190f2b4-6b8c-7abc-8def-0123456789ab"
    assert copy_text(datetime(2026, 12, 1, 3, 4, 5, 6, tzinfo=UTC)) == (
        "2026-12-01T03:04:05.000006+00:00"
    )
    plus_two = datetime(2026, 12, 1, 5, 0, tzinfo=timezone(timedelta(hours=2)))
    assert copy_text(plus_two) == "2026-12-01T05:00:00+02:00"  # the offset travels with it
    assert copy_text({"a": "ü\\n"}) == '{"a": "ü\\\\\\\\n"}'  # JSON's backslash, doubled
    assert copy_text(["x"]) == '["x"]'


def test_text_escapes_what_would_end_a_column_or_a_line() -> None:
    assert escape("a\tb\nc\rd\\e") == "a\\tb\\nc\\rd\\\\e"
    assert escape("\\N") == "\\\\N"  # a string that reads "\N" is not NULL
    assert copy_text("plain ✓") == "plain ✓"


def test_what_it_cannot_write_is_refused() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        copy_text(datetime(2026, 12, 1))
    with pytest.raises(TypeError, match="no COPY text for float"):
        copy_text(1.5)
