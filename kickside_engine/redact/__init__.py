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
Every pattern runs in time linear in the input (possessive quantifiers, bounded scans and
explicit loops instead of backtracking), and redaction is idempotent.

The package's modules, each importable on its own:

- :mod:`~kickside_engine.redact.keys`: which keys name secrets (:func:`is_sensitive_key`);
- :mod:`~kickside_engine.redact.patterns`: what a secret looks like in free text;
- :mod:`~kickside_engine.redact.free_text`: :func:`redact_text` and :func:`truncate`;
- :mod:`~kickside_engine.redact.values`: :func:`redact_value`, :func:`redact_args`,
  :func:`redact_meta`;
- :mod:`~kickside_engine.redact.declared`: the names an application declares
  (:func:`sensitive_key_names`) and the meta entries that carry them.

It imports only the standard library and :mod:`kickside_engine.errors`, so that every layer can
use it (``tests/test_layering.py`` checks this).
"""

from __future__ import annotations

from kickside_engine.redact.declared import (
    REDACTED_ARGS_META,
    SENSITIVE_KEYS_META,
    declared_sensitive_keys,
    sensitive_key_names,
)
from kickside_engine.redact.free_text import redact_text, truncate
from kickside_engine.redact.keys import is_sensitive_key, key_words
from kickside_engine.redact.patterns import REDACTED
from kickside_engine.redact.values import redact_args, redact_meta, redact_value

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
    "sensitive_key_names",
    "truncate",
]
