"""The free-text patterns: what a secret looks like in an error message or a log line.

Each pass here removes one kind of secret from a string (PEM private keys, a URL's password,
well-known token shapes, the credential after an authorization scheme, the value after a
sensitive key); :func:`kickside_engine.redact.free_text.redact_text` runs them in order. Every
pattern runs in time linear in its input: possessive quantifiers, bounded scans and explicit
loops instead of backtracking.
"""

from __future__ import annotations

import re

from kickside_engine.redact.keys import KeyRules

REDACTED = "[REDACTED]"
"""What a removed secret is replaced with."""

_REDACTED_PRIVATE_KEY = "[REDACTED PRIVATE KEY]"

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


def redact_private_keys(text: str) -> str:
    """PEM private key blocks, each replaced whole (to the end when the footer is missing)."""
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


def redact_url_credentials(text: str) -> str:
    """The password of each ``scheme://user:password@host``; the user stays."""
    if "://" not in text:
        return text
    return _URL_CREDENTIALS.sub(lambda m: m.group("prefix") + REDACTED + "@", text)


def redact_key_values(text: str, rules: KeyRules) -> str:
    """The value after each key ``rules`` find sensitive, followed by ``=`` or ``:``."""
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


def redact_auth_credentials(text: str) -> str:
    """The credential after ``Bearer``, ``Basic`` or ``Token`` (the scheme word stays)."""
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


def redact_token_shapes(text: str) -> str:
    """Well-known token shapes found without a key (GitHub, Slack, AWS, Stripe, JWT)."""
    return _TOKEN_SHAPES.sub(REDACTED, text)
