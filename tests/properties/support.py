"""What the property tests share: a settings profile, nasty inputs, and the two contracts.

Contract 1: a call either does its documented thing or raises a :class:`KicksideError` with a
one-line message; any other exception is a bug (hypothesis shrinks it to the smallest input).
Contract 2: after every example the database is consistent (``find_inconsistencies`` is empty).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kickside_engine import Database, KicksideError
from kickside_engine.control.consistency import find_inconsistencies

T = TypeVar("T")

# Modest counts (both backends run each test; KICKSIDE_PROPERTY_EXAMPLES asks for more in a
# deeper local run) and no deadline: CI machines vary. The database fixture is shared by every
# example of a test on purpose: state accumulates, and the consistency check looks at all of it.
PROPERTY = settings(
    max_examples=int(os.environ.get("KICKSIDE_PROPERTY_EXAMPLES", "30")),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

SQL_NASTY = (
    "%",
    "_",
    "\\",
    "%_%",
    "\\%",
    "'",
    '"',
    "'; DROP TABLE kickside_job; --",
    '"; DROP TABLE kickside_job; --',
    "' OR '1'='1",
    "\\'",
    "a\\",
    "$1",
    ":param",
    "?",
)
UNICODE_NASTY = (
    "\x00",
    "a\x00b",
    "\udcff",
    "\ud800",
    "\ud83d\ude00",  # a surrogate pair written out: two lone surrogates to Python
    "😀",
    "Zürich",
    "ß",
    "İ",
    "\u202e",  # right-to-left override
    "\ufeff",
    "\n",
    "line\nbreak",
    "\t",
    "\x1b[31m",
    "[red]markup[/red]",
)
EMPTY_NASTY = ("", " ", "\t\n", "\u3000")
HUGE_NASTY = ("x" * 256, "y" * 100_000, "z" * 2_000_000)

#: Any text, including lone surrogates and NUL, plus hand-picked troublemakers.
any_text = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=40),
    st.sampled_from(SQL_NASTY + UNICODE_NASTY + EMPTY_NASTY + HUGE_NASTY),
)
#: Text that can be stored: no NUL, no lone surrogates (a few are still empty or huge).
storable_text = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40),
    st.sampled_from((*SQL_NASTY, "😀", "Zürich", "ß", "İ", "\u202e", "\n", "[red]markup[/red]")),
)
#: Integers small and huge, negative and positive.
any_int = st.one_of(
    st.integers(min_value=-20, max_value=20),
    st.integers(),
    st.sampled_from((2**31, 2**31 - 1, 2**63, -(2**63), 10**30, -(10**30), 10_000, 10_001)),
)
#: Floats including NaN, infinities and the extremes.
any_float = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from((0.0, -0.0, 1e-9, 1e9, 1e300, -1e300, float("nan"), float("inf"))),
)
#: Strings that look like job ids, and many that do not.
job_id_text = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: u.hex.upper()),
    st.uuids().map(lambda u: f"{{{u}}}"),
    st.uuids().map(lambda u: f"urn:uuid:{u}"),
    st.uuids().map(lambda u: f" {u}\n"),
    st.uuids().map(lambda u: str(u)[:-1]),
    st.uuids().map(lambda u: f"{u}\x00"),
    st.uuids().map(lambda u: u.hex[-8:]),  # a short id, as tables show it
    st.uuids().map(lambda u: u.hex[-12:].upper()),
    st.uuids().map(lambda u: u.hex[-7:]),  # too short to be one
    st.uuids().map(lambda u: u.hex[-13:]),  # longer than the last group
    any_text,
)
#: JSON-like values of any shape (finite and not), with nasty strings.
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), any_int, any_float, any_text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(any_text, inner, max_size=4)
    ),
    max_leaves=12,
)
#: Malformed JSON documents (and a few well-formed ones that are not objects).
bad_json_text = st.one_of(
    st.sampled_from(
        (
            "",
            "{",
            "}",
            "[1, 2",
            "{'a': 1}",
            '{"a": }',
            "NaN",
            "null",
            "[]",
            "1",
            '"text"',
            '{"a": NaN}',
            '{"a": Infinity}',
            '{"a": "\\u0000"}',
            '{"a": "\\ud800"}',
            "[" * 100_000 + "]" * 100_000,
            '{"a": ' * 5_000 + "1" + "}" * 5_000,
        )
    ),
    any_text,
)


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def attempt(call: Callable[[], T]) -> T | KicksideError:
    """Run ``call``; return its result, or the :class:`KicksideError` it raised, checked.

    Any other exception propagates: the property failed.
    """
    try:
        return call()
    except KicksideError as exc:
        assert_clear(exc)
        return exc


def assert_clear(exc: KicksideError) -> None:
    """A Kickside error says what went wrong on one line (no traceback, no driver dump)."""
    message = str(exc)
    assert message.strip(), f"{type(exc).__name__} without a message"
    assert "\n" not in message, f"multi-line message: {message[:300]!r}"
    assert "Traceback" not in message
    assert "[SQL:" not in message, f"a driver error leaked: {message[:300]!r}"


def assert_consistent(db: Database) -> None:
    """No job or run in a state the engine never produces."""
    problems = find_inconsistencies(db)
    assert problems == [], problems


def is_storable(value: Any) -> bool:
    """Whether every string in a JSON-like value can be stored (no NUL, no lone surrogate)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item or _has_surrogate(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


def is_name(value: str, max_length: int = 255) -> bool:
    """The engine's rule for worker and queue names, restated."""
    return len(value) <= max_length and bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:\-/]*", value))


def absent_id() -> uuid.UUID:
    """A well-formed job id that no job has."""
    return uuid.uuid4()
