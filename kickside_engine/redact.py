"""The one redaction Kickside applies wherever text or job data leaves the worker.

Stored job errors and arguments, log lines, CLI output and the dashboard all pass through
:func:`redact_text` (free text) or :func:`redact_value` (JSON-like data). Redaction removes the
secret and keeps the context: the host, path and cause of an error stay readable::

    >>> redact_text("charge failed for https://deploy:pw@api.example.com/v1?token=abc")
    'charge failed for https://deploy:[REDACTED]@api.example.com/v1?token=[REDACTED]'

What is removed from free text:

- the password of a URL's credentials (``scheme://user:password@host``); the user stays;
- the value after a sensitive key (see :func:`is_sensitive_key`) followed by ``=`` or ``:``,
  quoted or not, in query strings, ``key=value`` lists, headers, JSON and ``repr`` output;
- the credential after ``Bearer``, ``Basic`` or ``Token`` (the scheme word stays);
- well-known token shapes even without a key: GitHub, Slack, AWS access key ids, Stripe keys,
  JWTs and PEM private key blocks.

Every pattern runs in time linear in the input (possessive quantifiers, bounded scans and
explicit loops instead of backtracking), and redaction is idempotent. This module imports only
the standard library so that every layer can use it.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeGuard

__all__ = ["REDACTED", "is_sensitive_key", "redact_text", "redact_value", "truncate"]

REDACTED = "[REDACTED]"
"""What a removed secret is replaced with."""

_REDACTED_PRIVATE_KEY = "[REDACTED PRIVATE KEY]"
_TRUNCATED = "\u2026[truncated]"

# --- sensitive keys -----------------------------------------------------------------------

# A key is split into parts on "_", "-", ".", whitespace and camelCase boundaries, lowercased.
# A part equal to one of these words makes the key sensitive.
_SENSITIVE_PARTS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "session",
        "sessionid",
        "cookie",
        "cookies",
        "setcookie",
        "signature",
    }
)
# A part ending with one of these is sensitive too: PGPASSWORD, accesstoken, csrftoken, ...
# ("passwordless" or "tokenizer" only start with them, and stay ordinary.)
_SENSITIVE_SUFFIXES = ("password", "passwd", "secret", "token", "apikey")
# Two adjacent parts naming a key that is a secret: api_key, X-Api-Key, accessKey, ...
_SENSITIVE_KEY_QUALIFIERS = frozenset(
    {"api", "access", "private", "secret", "signing", "encryption"}
)
# Words that are sensitive only as the whole key ("key=", "sig="), not as a part of one.
_SENSITIVE_WHOLE_KEYS = frozenset({"key", "sig"})
# Cheap substring pre-check: a key containing none of these cannot be sensitive.
_KEY_HINTS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "credential",
    "session",
    "cookie",
    "sig",
)

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_KEY_SEPARATORS = re.compile(r"[_\-.\s]+")


def is_sensitive_key(key: str) -> bool:
    """Tell whether a mapping key or parameter name names a secret.

    The key is split into parts on ``_``, ``-``, ``.``, whitespace and camelCase boundaries
    and compared case-insensitively. It is sensitive when a part is one of the sensitive words
    (``password``, ``passwd``, ``pwd``, ``secret``, ``token``, ``auth``, ``authorization``,
    ``credential(s)``, ``session``, ``cookie``, ``signature``, ``apikey``, ...), when a part
    ends with ``password``, ``passwd``, ``secret``, ``token`` or ``apikey`` (``PGPASSWORD``,
    ``csrftoken``), when two adjacent parts form ``api key``, ``access key``, ``private key``
    (and a few more), or when the whole key is ``key`` or ``sig``.

    Ordinary words stay ordinary: ``monkey``, ``keyboard``, ``author``, ``passwordless``,
    ``primary_key`` and ``tokenizer`` are not sensitive.
    """
    return _is_sensitive_key(key)


@functools.lru_cache(maxsize=4096)
def _is_sensitive_key(key: str) -> bool:
    lowered = key.lower()
    if not any(hint in lowered for hint in _KEY_HINTS):
        return False
    parts = [p for p in _KEY_SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", key).lower()) if p]
    if not parts:
        return False
    if len(parts) == 1 and parts[0] in _SENSITIVE_WHOLE_KEYS:
        return True
    for index, part in enumerate(parts):
        if part in _SENSITIVE_PARTS or part.endswith(_SENSITIVE_SUFFIXES):
            return True
        if part == "key" and index > 0 and parts[index - 1] in _SENSITIVE_KEY_QUALIFIERS:
            return True
    return False


# --- free-text patterns -------------------------------------------------------------------

# PEM private key blocks. The header is found by regex; the matching footer by a separate
# search, so a header without a footer costs one scan and redacts to the end of the text.
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")

# scheme://user:password@host. Anchored on "://" (no scheme scan, so no quadratic behaviour on
# long words). The user part stays. The password runs to the last "@" of the authority.
_URL_CREDENTIALS = re.compile(r"(?P<prefix>://[^\s:/?#@]*+:)(?P<password>[^\s/?#]+)@")

# A key followed by "=" or ":" (not "==", "::" or ":="); the value is matched separately. The
# two lookaheads let the regex engine skip, cheaply, words not followed by a separator and keys
# that contain none of the hint words; is_sensitive_key decides the rest.
_KEY_SEPARATOR = re.compile(
    r"(?<![\w.\-])"
    r"(?=[\w.\-]++[\"']?[ \t]*+[:=](?![:=]))"
    r"(?=[\w.\-]*?(?i:" + "|".join(_KEY_HINTS) + r"))"
    r"(?P<key>[\w.\-]++)[\"']?[ \t]*+(?P<sep>[:=])(?![:=])[ \t]*+"
)

_AUTH_SCHEME = r"(?:bearer|basic|token|digest|negotiate)[ \t]++"
_VALUE_END = r"\s&,;\"')\]}"
# The value after a sensitive key: a quoted string (scanned at most 1024 characters so that
# unterminated quotes cannot make the scan quadratic), a simple bracketed word ("[abc]"), or an
# unquoted run that does not start with an opening bracket (so "tokens: ['a', 'b']" and nested
# JSON are left to the other rules). An optional authorization scheme word is kept. An earlier
# "[REDACTED]" is taken whole, so redaction is idempotent.
_VALUE = re.compile(
    r'"(?P<scheme1>' + _AUTH_SCHEME + r')?(?P<value1>(?:[^"\\\n]|\\.){1,1024}+)"'
    r"|'(?P<scheme2>" + _AUTH_SCHEME + r")?(?P<value2>(?:[^'\\\n]|\\.){1,1024}+)'"
    r"|[\"']?(?P<scheme3>" + _AUTH_SCHEME + r")?"
    r"(?P<value3>\[[^\[\]\s\"',;&]*+\]"
    r"|[^" + _VALUE_END + r"\[{(](?:[^" + _VALUE_END + r"\[]++|\[REDACTED\]|\[)*+)",
    re.IGNORECASE,
)

# "Bearer <token>" anywhere. The credential is checked by _looks_like_credential so that
# prose such as "Token expired" stays readable.
_AUTH_CREDENTIAL = re.compile(
    r"(?<![\w\-])(?P<scheme>Bearer|BEARER|bearer|Basic|BASIC|Token|TOKEN)[ \t]++"
    r"(?P<credential>(?>[A-Za-z0-9\-_~+/]++(?:\.[A-Za-z0-9\-_~+/]++)*+)=*+)(?![\w\[])"
)
_CREDENTIAL_SYMBOLS = frozenset("0123456789-_~+/.=")

# Token shapes recognisable without a key.
_TOKEN_SHAPES = re.compile(
    # The leading lookahead on the possible first characters makes the scan of ordinary text
    # several times faster.
    r"(?=[gxAsre])(?:"
    + "|".join(
        (
            # GitHub personal, OAuth, user-to-server, server-to-server and refresh tokens.
            r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}+",
            r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}+",
            # Slack bot, user, app and refresh tokens.
            r"(?<![A-Za-z0-9])xox[abeoprs]-[A-Za-z0-9\-]{10,}+",
            # AWS access key ids (long-term and temporary).
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
            # Stripe secret and restricted keys.
            r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{8,}+",
            # JSON Web Tokens: three base64url segments, the first a JSON object ("eyJ").
            r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]++\.[A-Za-z0-9_\-]++\.[A-Za-z0-9_\-]*+",
        )
    )
    + ")"
)


def _redact_private_keys(text: str) -> str:
    if "PRIVATE KEY-----" not in text:
        return text
    pieces: list[str] = []
    position = 0
    while True:
        begin = _PEM_BEGIN.search(text, position)
        if begin is None:
            break
        pieces.append(text[position : begin.start()])
        pieces.append(_REDACTED_PRIVATE_KEY)
        end = _PEM_END.search(text, begin.end())
        if end is None:
            # A header without its footer (a truncated message): the rest is key material.
            return "".join(pieces)
        position = end.end()
    pieces.append(text[position:])
    return "".join(pieces)


def _redact_url_credentials(text: str) -> str:
    if "://" not in text:
        return text
    return _URL_CREDENTIALS.sub(lambda m: m.group("prefix") + REDACTED + "@", text)


def _redact_key_values(text: str) -> str:
    if "=" not in text and ":" not in text:
        return text
    pieces: list[str] = []
    position = 0
    length = len(text)
    while position < length:
        match = _KEY_SEPARATOR.search(text, position)
        if match is None:
            break
        if not is_sensitive_key(match.group("key")):
            # Resume after the separator, so that "a=password=x" still finds "password".
            pieces.append(text[position : match.end("sep")])
            position = match.end("sep")
            continue
        value = _VALUE.match(text, match.end())
        if value is None:
            pieces.append(text[position : match.end()])
            position = match.end()
            continue
        group = value.lastgroup or "value3"  # the value group always closes last
        pieces.append(text[position : value.start(group)])
        pieces.append(REDACTED)
        position = value.end(group)
    pieces.append(text[position:])
    return "".join(pieces)


def _looks_like_credential(word: str) -> bool:
    if len(word) >= 20:
        return True
    if len(word) < 6:
        return False
    if any(char in _CREDENTIAL_SYMBOLS for char in word):
        return True
    # Mixed case beyond a leading capital ("dXNlcjpwYXNz"), unlike a word such as "Expired".
    return any(char.isupper() for char in word[1:]) and any(char.islower() for char in word)


def _redact_auth_credentials(text: str) -> str:
    pieces: list[str] = []
    position = 0
    while True:
        match = _AUTH_CREDENTIAL.search(text, position)
        if match is None:
            break
        if _looks_like_credential(match.group("credential")):
            pieces.append(text[position : match.start("credential")])
            pieces.append(REDACTED)
            position = match.end()
        else:
            # Resume after the scheme word: in "Bearer Bearer abc123" the second one counts.
            pieces.append(text[position : match.end("scheme")])
            position = match.end("scheme")
    pieces.append(text[position:])
    return "".join(pieces)


def _redact_token_shapes(text: str) -> str:
    return _TOKEN_SHAPES.sub(REDACTED, text)


def redact_text(text: str) -> str:
    """Return ``text`` with secrets replaced by :data:`REDACTED`, keeping it readable.

    Removes URL passwords (the user, host and path stay), values of sensitive keys in
    ``key=value``, ``key: value`` and JSON-like ``"key": "value"`` pairs, the credential after
    ``Bearer``/``Basic``/``Token``, PEM private key blocks (replaced by
    ``[REDACTED PRIVATE KEY]``) and well-known token shapes (GitHub, Slack, AWS access key
    ids, Stripe keys, JWTs).

    The result is stable: ``redact_text(redact_text(x)) == redact_text(x)``. It never raises on
    a ``str`` (any size, any code points including lone surrogates) and runs in time roughly
    linear in the length of the text. Redact before truncating, so that a secret cut in half
    is still recognised.
    """
    text = _redact_private_keys(text)
    text = _redact_url_credentials(text)
    text = _redact_token_shapes(text)
    text = _redact_auth_credentials(text)
    text = _redact_key_values(text)
    # Once more: a quoted value redacted above may have hidden the spaces that kept a URL's
    # password from being recognised ('https://u:password="a b"@host').
    return _redact_url_credentials(text)


# --- structured values --------------------------------------------------------------------


def _is_container(value: object) -> TypeGuard[dict[Any, Any] | list[Any] | tuple[Any, ...]]:
    return isinstance(value, dict | list | tuple)


def _redact_leaf(value: object) -> object:
    if isinstance(value, str):
        return redact_text(value)
    return value


class _Frame:
    """One container being rebuilt by :func:`redact_value`'s explicit stack."""

    __slots__ = ("children", "index", "keys", "results", "source")

    def __init__(self, source: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> None:
        self.source = source
        self.keys: list[Any] | None
        self.children: list[Any]
        if isinstance(source, dict):
            self.keys = list(source.keys())
            self.children = list(source.values())
        else:
            self.keys = None
            self.children = list(source)
        self.index = 0
        self.results: list[object] = []

    def build(self) -> object:
        if self.keys is not None:
            return {
                (redact_text(key) if isinstance(key, str) else key): value
                for key, value in zip(self.keys, self.results, strict=True)
            }
        if isinstance(self.source, tuple):
            return tuple(self.results)
        return self.results


def redact_value(value: object) -> object:
    """Return a redacted copy of a JSON-like value (dicts, lists, tuples, scalars).

    A dict entry whose key is sensitive (:func:`is_sensitive_key`) has its value replaced by
    :data:`REDACTED`, whatever its type, except that ``None`` stays ``None``. Every other
    string, including dict keys, goes through :func:`redact_text`. Dicts, lists and tuples are
    rebuilt as plain ``dict``, ``list`` and ``tuple``; the input is never mutated. Numbers,
    booleans, ``None`` and objects that are not JSON-like are returned unchanged.

    Nesting of any depth is handled with an explicit stack (no ``RecursionError``). A container
    that contains itself is replaced by :data:`REDACTED` where it recurs; a container shared
    between several places is redacted once and the copy shared the same way.
    """
    if not _is_container(value):
        return _redact_leaf(value)
    done: dict[int, object] = {}
    active: set[int] = {id(value)}
    stack = [_Frame(value)]
    while True:
        frame = stack[-1]
        if frame.index == len(frame.children):
            stack.pop()
            active.discard(id(frame.source))
            built = frame.build()
            done[id(frame.source)] = built
            if not stack:
                return built
            stack[-1].results.append(built)
            continue
        index = frame.index
        frame.index += 1
        child = frame.children[index]
        if frame.keys is not None:
            key = frame.keys[index]
            if isinstance(key, str) and is_sensitive_key(key):
                frame.results.append(None if child is None else REDACTED)
                continue
        if not _is_container(child):
            frame.results.append(_redact_leaf(child))
            continue
        child_id = id(child)
        if child_id in done:
            frame.results.append(done[child_id])
        elif child_id in active:
            frame.results.append(REDACTED)
        else:
            active.add(child_id)
            stack.append(_Frame(child))


# --- size cap -----------------------------------------------------------------------------


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
