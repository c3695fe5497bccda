"""Which keys name secrets: the words of a key, and the rules that judge its last word.

A key is split into words (on ``_``, ``-``, ``.``, whitespace and camelCase) and judged by what
its last word names (:func:`is_sensitive_key`). :class:`KeyRules` holds the judgement for one
set of names an application declared, with the regex :mod:`~kickside_engine.redact.patterns`
uses to find ``key=value`` pairs in free text; :func:`rules_for` builds it once per set.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

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


class KeyRules:
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
def _rules_of(names: tuple[str, ...]) -> KeyRules:
    return KeyRules(names)


_DEFAULT_RULES = _rules_of(())


def rules_for(sensitive_keys: Iterable[str]) -> KeyRules:
    """The rules for the default sensitive names plus ``sensitive_keys`` (cached per set)."""
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
    return rules_for(sensitive_keys).sensitive(key, in_text=False)
