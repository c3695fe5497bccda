"""A faster JSON loader for the pool's turn connection, giving what ``json.loads`` gives.

A claim loads four JSON columns per job (args, meta, tags, errors), most of them ``{}`` or
``[]``. psycopg calls ``json.loads`` on bytes, which first sniffs the bytes' encoding; the
server sends UTF-8, so decoding it directly and answering the empty documents without a parse
took the claim's JSON from about a fifth of its client CPU to a few percent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_decode = json.JSONDecoder().decode  # json.loads's own decoder, with its defaults
_EMPTY: dict[str | bytes, Callable[[], Any]] = {b"{}": dict, b"[]": list, "{}": dict, "[]": list}


def load_json(data: str | bytes) -> Any:
    """``json.loads(data)`` for the UTF-8 documents PostgreSQL sends."""
    empty = _EMPTY.get(data)
    if empty is not None:
        return empty()  # a new object each time: the caller may change it
    return _decode(data.decode() if isinstance(data, bytes) else data)


def use_fast_json(driver_connection: Any) -> None:
    """Load ``json``/``jsonb`` values on this psycopg connection with :func:`load_json`."""
    from psycopg.types.json import set_json_loads

    set_json_loads(load_json, driver_connection)
