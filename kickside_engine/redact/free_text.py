"""Redacting free text (errors, log lines) and capping its size.

:func:`redact_text` runs the passes of :mod:`~kickside_engine.redact.patterns` in order;
:func:`truncate` cuts text to a byte budget (redact first, so that a secret cut in half is still
recognised).
"""

from __future__ import annotations

from collections.abc import Iterable

from kickside_engine.redact.keys import KeyRules, rules_for
from kickside_engine.redact.patterns import (
    redact_auth_credentials,
    redact_key_values,
    redact_private_keys,
    redact_token_shapes,
    redact_url_credentials,
)

_TRUNCATED = "\u2026[truncated]"


def redact_text(text: str, sensitive_keys: Iterable[str] = ()) -> str:
    """Return ``text`` with secrets replaced by :data:`REDACTED`, keeping it readable.

    Removes URL passwords (the user, host and path stay), values of sensitive keys (and of
    the names in ``sensitive_keys``) in ``key=value``, ``key: value`` and JSON-like
    ``"key": "value"`` pairs, the credential after ``Bearer``/``Basic``/``Token``, PEM private
    key blocks (replaced by ``[REDACTED PRIVATE KEY]``) and well-known token shapes (GitHub,
    Slack, AWS access key ids, Stripe keys, JWTs).

    The result is stable: ``redact_text(redact_text(x)) == redact_text(x)``. It never raises on
    a ``str`` (any size, any code points including lone surrogates) and runs in time roughly
    linear in the length of the text. Redact before truncating, so that a secret cut in half
    is still recognised.
    """
    return redact_text_with(text, rules_for(sensitive_keys))


def redact_text_with(text: str, rules: KeyRules) -> str:
    """:func:`redact_text` with the rules already built (the value walker's per-string call)."""
    text = redact_private_keys(text)
    text = redact_url_credentials(text)
    text = redact_token_shapes(text)
    text = redact_auth_credentials(text)
    text = redact_key_values(text, rules)
    # Once more: a quoted value redacted above may have hidden the spaces that kept a URL's
    # password from being recognised ('https://u:password="a b"@host').
    return redact_url_credentials(text)


def truncate(text: str, limit_bytes: int = 4096) -> str:
    """Cap ``text`` at ``limit_bytes`` bytes of UTF-8, keeping its start.

    When the text is cut, ``…[truncated]`` is appended and the result, marker included, fits
    in ``limit_bytes``. A multi-byte character is never split. If the limit is too small to
    hold the marker, the text is cut to the limit without it; a limit of zero or less gives
    ``""``. Lone surrogates count as three bytes and never raise. Redact before truncating.
    """
    if limit_bytes <= 0:
        return ""
    if len(text) * 4 <= limit_bytes:
        return text
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit_bytes:
        return text
    marker = _TRUNCATED.encode("utf-8")
    suffix = _TRUNCATED
    budget = limit_bytes - len(marker)
    if budget < 0:
        budget, suffix = limit_bytes, ""
    # Step back to the first byte of the character that would be split (continuation bytes
    # are 0b10xxxxxx), so the kept prefix decodes cleanly.
    while budget > 0 and encoded[budget] & 0xC0 == 0x80:
        budget -= 1
    return encoded[:budget].decode("utf-8", "surrogatepass") + suffix
