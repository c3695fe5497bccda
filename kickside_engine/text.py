"""Text and JSON the database can store: the checks every public entry point shares.

PostgreSQL cannot store a NUL character in text or JSON, and neither backend can store a lone
surrogate (``"\\udcff"``: half a UTF-16 pair, which is not Unicode text; Python makes them from
undecodable bytes in command-line arguments and file names). Such values are refused up front
with an :class:`~kickside_engine.errors.InvalidArgumentError` naming the field, on SQLite as on
PostgreSQL, so that the two backends agree and nothing is half-written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kickside_engine.errors import InvalidArgumentError

# A JSON "\u0000" escape whose backslash is not itself escaped ("\\u0000" is the text \u0000).
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def unstorable_reason(text: str) -> str | None:
    """Why ``text`` cannot be stored ("a NUL character", "a lone surrogate ..."), or None."""
    if "\x00" in text:
        return "a NUL character"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate {text[exc.start]!r} (not valid Unicode)"
    return None


def require_text(
    value: Any, field: str, *, max_length: int | None = 255, allow_empty: bool = False
) -> str:
    """``value`` as storable text, or :class:`InvalidArgumentError` naming ``field``.

    Refuses non-strings, empty (or blank) strings unless ``allow_empty``, strings longer than
    ``max_length`` characters, NUL characters and lone surrogates.
    """
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InvalidArgumentError(f"{field} must be a non-empty string, got {value!r}")
    if max_length is not None and len(value) > max_length:
        raise InvalidArgumentError(f"{field} is longer than {max_length} characters")
    reason = unstorable_reason(value)
    if reason is not None:
        raise InvalidArgumentError(f"{field} contains {reason}, which cannot be stored")
    return value


def require_storable_json(encoded: str, field: str) -> str:
    """Check a JSON document's text for values that cannot be stored; returns it.

    ``encoded`` must come from ``json.dumps(..., ensure_ascii=False)``, which writes lone
    surrogates as they are and a NUL as the escape ``\\u0000``. Both are refused, in keys as in
    values; a literal backslash followed by ``u0000`` is ordinary text and passes.
    """
    if "\\u0000" in encoded and _JSON_NUL.search(encoded):
        raise InvalidArgumentError(f"{field} contain a NUL character, which cannot be stored")
    reason = None if encoded.isascii() else unstorable_reason(encoded)
    if reason is not None:
        raise InvalidArgumentError(f"{field} contain {reason}, which cannot be stored")
    return encoded


#: A worker or queue name: a letter or _ first, then letters, digits and _ . : - /.
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:\-/]{0,254}$")


def validate_name(value: object, field: str, *, max_length: int = 255) -> str:
    """A worker or queue name: non-empty, printable, no spaces, at most ``max_length``."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{field} must be a non-empty string, got {value!r}")
    if len(value) > max_length or not NAME_PATTERN.fullmatch(value):
        raise InvalidArgumentError(
            f"invalid {field} {value[:80]!r}: use letters, digits and _ . : - / "
            f"(at most {max_length} characters, starting with a letter or _)"
        )
    return value


#: How many names an "unknown name" error lists.
KNOWN_NAMES_SHOWN = 20


def known_names(names: Sequence[str]) -> str:
    """``a, b, c`` for an "unknown name" error: at most :data:`KNOWN_NAMES_SHOWN`, then how
    many more; ``none`` when there are none."""
    shown = ", ".join(names[:KNOWN_NAMES_SHOWN]) or "none"
    more = len(names) - KNOWN_NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
