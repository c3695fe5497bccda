"""A set of ids as one bound parameter, however many there are.

``column IN (:id_1, :id_2, ...)`` takes one parameter per id, and drivers stop at a limit
(psycopg at 65,535 parameters, SQLite at 32,766 variables). :func:`id_in` sends the whole set as
one value instead: an array on PostgreSQL, a JSON array read by ``json_each`` on SQLite.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection

from sqlalchemy import ColumnElement, Text, Uuid, any_, bindparam, func, select
from sqlalchemy.dialects import postgresql

from kickside_engine.store.database import Database


def id_in(
    db: Database, column: ColumnElement[uuid.UUID], ids: Collection[uuid.UUID]
) -> ColumnElement[bool]:
    """``column`` is one of ``ids``, with ``ids`` bound as a single parameter.

    On PostgreSQL ``column = ANY(:ids)`` with a ``uuid[]``; on SQLite ``column IN (SELECT value
    FROM json_each(:ids))``, the ids written as the ``Uuid`` type stores them there (32 hex
    digits), so the primary key index is used as for a literal list.
    """
    if db.is_postgresql:
        values = bindparam(None, list(ids), type_=postgresql.ARRAY(Uuid()))
        return column == any_(values)
    hexes = bindparam(None, json.dumps([i.hex for i in ids]), type_=Text())
    each = func.json_each(hexes).table_valued("value")
    return column.in_(select(each.c.value))
