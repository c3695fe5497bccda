"""The one redaction Kickside applies wherever text or job data is shown, logged or searched.

Two contracts (the oban seed's): **errors are stored redacted**, and **args are stored and
delivered exactly as the application gave them** (they hold ids, never secrets) and are
redacted wherever they are shown, logged or searched. So :func:`redact_text` runs before an
error is stored and before a log line is written, and :func:`redact_value` (through
:func:`redact_args` and :func:`redact_meta`) runs on the way out: the CLI, ``--json``, the
dashboard, test-helper messages. Search reads a redacted copy that enqueue records (see
:data:`REDACTED_ARGS_META`). Redaction removes the secret and keeps the context::

    >>> redact_text("charge failed for https://deploy:pw@api.example.com/v1?token=abc")
    'charge failed for https://deploy:[REDACTED]@api.example.com/v1?token=[REDACTED]'

What is removed from free text:

- the password of a URL's credentials (``scheme://user:password@host``); the user stays;
- the value after a sensitive key (see :func:`is_sensitive_key`) followed by ``=`` or ``:``,
  quoted or not, in query strings, ``key=value`` lists, headers, JSON and ``repr`` output; in
  free text a bare ``key``, ``sig``, ``session`` or ``sessionid`` counts too (an API key or a
  signature in a URL's query, a session cookie);
- the credential after ``Bearer``, ``Basic`` or ``Token`` (the scheme word stays);
- well-known token shapes even without a key: GitHub, Slack, AWS access key ids, Stripe keys,
  JWTs and PEM private key blocks.

**Sensitive keys** are whole names, not fragments: a key is split into words (on ``_``, ``-``,
``.``, whitespace and camelCase) and it is what its last word names, as in English compounds:
``stripe_api_key`` and ``accessToken`` are secrets, ``token_count``, ``auth_provider`` and
``session_id`` are data. An application adds its own names (personal data such as ``ssn``),
per worker (``@registry.worker(..., sensitive_keys={"ssn"})``), for all of its workers
(``WorkerRegistry(sensitive_keys=...)``) or per job (``JobBuilder.sensitive_keys``). A
declared name matches the same way: ``ssn`` covers ``ssn``, ``customer_ssn`` and
``customerSsn``. The dashboard and the CLI do not import the application, so enqueue writes the
job's declared names into its meta (:data:`SENSITIVE_KEYS_META`): each job carries how it is to
be redacted, whichever process shows it.

Every pattern runs in time linear in the input (possessive quantifiers, bounded scans and
explicit loops instead of backtracking), and redaction is idempotent. This module imports only
the standard library so that every layer can use it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from kickside_engine.errors import InvalidArgumentError

__all__ = [
    "REDACTED",
    "REDACTED_ARGS_META",
    "SENSITIVE_KEYS_META",
    "declared_sensitive_keys",
    "is_sensitive_key",
    "key_words",
    "redact_args",
    "redact_meta",
    "redact_text",
    "redact_value",
    "truncate",
]

REDACTED = "[REDACTED]"
"""What a removed secret is replaced with."""

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

_REDACTED_PRIVATE_KEY = "[REDACTED PRIVATE KEY]"
_TRUNCATED = "\u2026[truncated]"

# --- sensitive keys -----------------------------------------------------------------------

# A key is split into words on "_", "-", ".", whitespace and camelCase boundaries, lowercased;
# trailing numbering is dropped (password2, X-Hub-Signature-256). The last word decides.
_SENSITIVE_NAMES = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "passcode",
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
        "cookie",
        "cookies",
        "setcookie",
        "signature",
    }
)
# A last word ending with one of these is sensitive too: PGPASSWORD, csrftoken, clientsecret.
# ("passwordless" or "tokenizer" only start with them, and stay ordinary.)
_SENSITIVE_ENDINGS = ("password", "passwd", "secret", "token", "apikey")
# "<qualifier> key" names a key that is a secret: api_key, X-Api-Key, accessKey, ...
_SENSITIVE_KEY_QUALIFIERS = frozenset(
    {"api", "access", "private", "secret", "signing", "encryption", "master"}
)
# Whole keys that are sensitive in free text only: "?key=" and "&sig=" in a URL are an API key
# and a signature, "session=" a cookie; as fields of args they are usually data (an object
# key, a chat session).
_TEXT_ONLY_KEYS = frozenset({"key", "sig", "session", "sessionid"})
# Cheap substring pre-check: a key containing none of these (nor a declared word) cannot be
# sensitive.
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


@functools.lru_cache(maxsize=8192)
def key_words(key: str) -> tuple[str, ...]:
    """The lowercase words of a key, as sensitive names are matched: ``"stripeApiKey"`` gives
    ``("stripe", "api", "key")``; trailing numbering is dropped (``"password2"``)."""
    words = [p for p in _KEY_SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", key).lower()) if p]
    while words:
        last = words[-1].rstrip("0123456789")
        if last:
            words[-1] = last
            break
        words.pop()
    return tuple(words)


class _Rules:
    """Sensitive-key matching with a set of declared names (built once per set, cached)."""

    __slots__ = ("declared", "hints", "key_separator")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.declared = tuple(words for words in {key_words(n) for n in names} if words)
        extra = sorted({w for words in self.declared for w in words} - set(_KEY_HINTS))
        self.hints = (*_KEY_HINTS, *extra)
        # A key followed by "=" or ":" (not "==", "::" or ":="); the value is matched
        # separately. The two lookaheads let the regex engine skip, cheaply, words not followed
        # by a separator and keys that contain none of the hint words; the rules decide the
        # rest.
        self.key_separator = re.compile(
            r"(?<![\w.\-])"
            r"(?=[\w.\-]++[\"']?[ \t]*+[:=](?![:=]))"
            r"(?=[\w.\-]*?(?i:" + "|".join(re.escape(h) for h in self.hints) + r"))"
            r"(?P<key>[\w.\-]++)[\"']?[ \t]*+(?P<sep>[:=])(?![:=])[ \t]*+"
        )

    def sensitive(self, key: str, *, in_text: bool) -> bool:
        lowered = key.lower()
        if not any(hint in lowered for hint in self.hints):
            return False
        words = key_words(key)
        if not words:
            return False
        if in_text and len(words) == 1 and words[0] in _TEXT_ONLY_KEYS:
            return True
        last = words[-1]
        if last in _SENSITIVE_NAMES or last.endswith(_SENSITIVE_ENDINGS):
            return True
        if last == "key" and len(words) > 1 and words[-2] in _SENSITIVE_KEY_QUALIFIERS:
            return True
        return any(words[-len(name) :] == name for name in self.declared if len(name) <= len(words))


@functools.lru_cache(maxsize=256)
def _rules_of(names: tuple[str, ...]) -> _Rules:
    return _Rules(names)


_DEFAULT_RULES = _rules_of(())


def _rules(sensitive_keys: Iterable[str]) -> _Rules:
    if not sensitive_keys:
        return _DEFAULT_RULES
    return _rules_of(tuple(sorted({k for k in sensitive_keys if isinstance(k, str) and k})))


def is_sensitive_key(key: str, sensitive_keys: Iterable[str] = ()) -> bool:
    """Tell whether a mapping key or parameter name names a secret.

    The key is split into words on ``_``, ``-``, ``.``, whitespace and camelCase boundaries,
    compared case-insensitively, trailing numbering dropped, and judged by its last word (a
    ``token_count`` is a count, an ``access_token`` a token). It is sensitive when that word
    is one of ``password``, ``passwd``, ``pwd``, ``passphrase``, ``passcode``, ``secret(s)``,
    ``token``, ``apikey``, ``accesskey``, ``secretkey``, ``privatekey``, ``auth``,
    ``authorization``, ``credential(s)``, ``cookie(s)``, ``setcookie`` or ``signature``; when
    it ends with ``password``, ``passwd``, ``secret``, ``token`` or ``apikey`` (``PGPASSWORD``,
    ``csrftoken``); when the last two words are ``api key``, ``access key``, ``private key``,
    ``secret key``, ``signing key``, ``encryption key`` or ``master key``; or when its last
    words are those of a name in ``sensitive_keys`` (the application's declarations: ``ssn``
    covers ``customer_ssn``).

    Ordinary words stay ordinary: ``token_count``, ``auth_provider``, ``session_id``,
    ``max_tokens``, ``monkey``, ``author``, ``passwordless``, ``primary_key``, ``key`` and
    ``tokenizer`` are not sensitive.
    """
    return _rules(sensitive_keys).sensitive(key, in_text=False)


def declared_sensitive_keys(meta: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The sensitive key names a job's meta declares (:data:`SENSITIVE_KEYS_META`); anything
    malformed there is ignored, so that showing a job never fails on its meta."""
    if not isinstance(meta, Mapping):
        return ()
    names = meta.get(SENSITIVE_KEYS_META)
    if not isinstance(names, list | tuple):
        return ()
    return tuple(n for n in names if isinstance(n, str) and n)


# --- free-text patterns -------------------------------------------------------------------

# PEM private key blocks. The header is found by regex; the matching footer by a separate
# search, so a header without a footer costs one scan and redacts to the end of the text.
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")

# scheme://user:password@host. Anchored on "://" (no scheme scan, so no quadratic behaviour on
# long words). The user part stays. The password runs to the last "@" of the authority.
_URL_CREDENTIALS = re.compile(r"(?P<prefix>://[^\s:/?#@]*+:)(?P<password>[^\s/?#]+)@")

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


def _redact_key_values(text: str, rules: _Rules) -> str:
    if "=" not in text and ":" not in text:
        return text
    pieces: list[str] = []
    position = 0
    length = len(text)
    while position < length:
        match = rules.key_separator.search(text, position)
        if match is None:
            break
        if not rules.sensitive(match.group("key"), in_text=True):
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
    return _redact_text(text, _rules(sensitive_keys))


def _redact_text(text: str, rules: _Rules) -> str:
    text = _redact_private_keys(text)
    text = _redact_url_credentials(text)
    text = _redact_token_shapes(text)
    text = _redact_auth_credentials(text)
    text = _redact_key_values(text, rules)
    # Once more: a quoted value redacted above may have hidden the spaces that kept a URL's
    # password from being recognised ('https://u:password="a b"@host').
    return _redact_url_credentials(text)


# --- structured values --------------------------------------------------------------------


def _is_container(value: object) -> TypeGuard[dict[Any, Any] | list[Any] | tuple[Any, ...]]:
    return isinstance(value, dict | list | tuple)


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

    def build(self, rules: _Rules) -> object:
        if self.keys is not None:
            return {
                (_redact_text(key, rules) if isinstance(key, str) else key): value
                for key, value in zip(self.keys, self.results, strict=True)
            }
        if isinstance(self.source, tuple):
            return tuple(self.results)
        return self.results


def redact_value(value: object, sensitive_keys: Iterable[str] = ()) -> object:
    """Return a redacted copy of a JSON-like value (dicts, lists, tuples, scalars).

    A dict entry whose key is sensitive (:func:`is_sensitive_key`, with the names in
    ``sensitive_keys``) has its value replaced by :data:`REDACTED`, whatever its type, except
    that ``None`` stays ``None``. Every other string, including dict keys, goes through
    :func:`redact_text`. Dicts, lists and tuples are rebuilt as plain ``dict``, ``list`` and
    ``tuple``; the input is never mutated. Numbers, booleans, ``None`` and objects that are not
    JSON-like are returned unchanged.

    Nesting of any depth is handled with an explicit stack (no ``RecursionError``). A container
    that contains itself is replaced by :data:`REDACTED` where it recurs (enqueue refuses such
    args; this is for values shown from elsewhere); a container shared between several places
    is redacted once and the copy shared the same way.
    """
    rules = _rules(sensitive_keys)
    if not _is_container(value):
        return _redact_text(value, rules) if isinstance(value, str) else value
    done: dict[int, object] = {}
    active: set[int] = {id(value)}
    stack = [_Frame(value)]
    while True:
        frame = stack[-1]
        if frame.index == len(frame.children):
            stack.pop()
            active.discard(id(frame.source))
            built = frame.build(rules)
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
            if isinstance(key, str) and rules.sensitive(key, in_text=False):
                frame.results.append(None if child is None else REDACTED)
                continue
        if not _is_container(child):
            frame.results.append(_redact_text(child, rules) if isinstance(child, str) else child)
            continue
        child_id = id(child)
        if child_id in done:
            frame.results.append(done[child_id])
        elif child_id in active:
            frame.results.append(REDACTED)
        else:
            active.add(child_id)
            stack.append(_Frame(child))


def redact_args(args: object, meta: Mapping[str, Any] | None = None) -> object:
    """A job's args as shown: :func:`redact_value` with the names its meta declares."""
    return redact_value(args, declared_sensitive_keys(meta))


def redact_meta(meta: Mapping[str, Any]) -> object:
    """A job's meta as shown: redacted with the names it declares, without the search copy of
    the args (:data:`REDACTED_ARGS_META`, which repeats them)."""
    shown = {k: v for k, v in meta.items() if k != REDACTED_ARGS_META}
    return redact_value(shown, declared_sensitive_keys(meta))


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
