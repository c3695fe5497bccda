"""Values in PostgreSQL's COPY text format, for bulk inserts that write whole lines at once.

Handing COPY a row of Python values makes the driver dump each one: for jobs that share all
but their id and args, formatting the shared values once and writing ready lines costs a
fraction of that. The format is PostgreSQL's (see COPY, "Text Format"): columns separated by
tabs, ``\\N`` for NULL, and backslash, newline, carriage return and tab escaped in values.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})

#: JSON as Kickside stores it (no NaN; unicode kept as is); one encoder for every row
#: (``json.dumps`` with options builds a new one per call).
encode_json = json.JSONEncoder(allow_nan=False, ensure_ascii=False).encode


def escape(text: str) -> str:
    """``text`` as one COPY text value."""
    return text.translate(_ESCAPES)


def copy_text(value: Any) -> str:
    """One column's value in COPY text format: NULL, a boolean, a number, a UUID, an aware
    timestamp, a string, or a JSON document (a mapping or a list)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (int, uuid.UUID)):
        return str(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: Kickside stores timezone-aware UTC")
        return value.isoformat()
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, (Mapping, Sequence)):
        return escape(encode_json(value))
    raise TypeError(f"no COPY text for {type(value).__name__}")
