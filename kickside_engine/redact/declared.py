"""The sensitive names an application declares, and the job meta entries that carry them.

Workers, registries and jobs declare names (:func:`sensitive_key_names` checks them); enqueue
writes a job's names into its meta (:data:`SENSITIVE_KEYS_META`), with a redacted copy of its
args for search when redaction changes them (:data:`REDACTED_ARGS_META`), so that any process
showing the job redacts it the same way without importing the application.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kickside_engine.errors import InvalidArgumentError
from kickside_engine.redact.keys import key_words

SENSITIVE_KEYS_META = "sensitive_keys"
"""The meta entry listing the key names a job's application declared sensitive (sorted)."""

REDACTED_ARGS_META = "redacted_args"
"""The meta entry holding the job's args as shown, written at enqueue only when redaction
changes them: what a search reads, so that searching for a secret never finds its job. Display
leaves it out (it repeats the args).

Search could instead redact each candidate in Python, but then counts, bulk previews and
bounded scans would stop being single SQL statements; a column of its own would change the job
row that claim statements map positionally onto :class:`~kickside_engine.models.Job`. Meta costs
nothing for the jobs that need no redaction (nearly all: args hold ids), and the copy is
written once, at enqueue, with the same names the displays use."""


def declared_sensitive_keys(meta: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The sensitive key names a job's meta declares (:data:`SENSITIVE_KEYS_META`); anything
    malformed there is ignored, so that showing a job never fails on its meta."""
    if not isinstance(meta, Mapping):
        return ()
    names = meta.get(SENSITIVE_KEYS_META)
    if not isinstance(names, list | tuple):
        return ()
    return tuple(n for n in names if isinstance(n, str) and n)


def sensitive_key_names(value: object, field: str = "sensitive_keys") -> frozenset[str]:
    """Declared sensitive key names: a collection of non-empty names, each with a word in it.

    Matching is by words (:func:`kickside_engine.redact.is_sensitive_key`), so ``"ssn"``
    covers ``customer_ssn`` and ``customerSsn``.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidArgumentError(
            f"{field} must be a collection of key names (e.g. {{'ssn'}}), got {value!r}"
        )
    names = set()
    for name in value:
        if not isinstance(name, str) or not 0 < len(name) <= 255 or not key_words(name):
            raise InvalidArgumentError(
                f"{field} must hold key names (letters or digits, at most 255), got {name!r}"
            )
        names.add(name)
    return frozenset(names)
