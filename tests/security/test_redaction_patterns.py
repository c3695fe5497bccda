"""The secret shapes issue 9 names, each redacted with its context kept (one case a line)."""

from __future__ import annotations

import pytest

from kickside_engine.redact import REDACTED, redact_text

CASES = [
    # Bearer tokens, however short, after an Authorization header; long ones anywhere.
    ("Authorization: Bearer x", "Authorization: Bearer"),
    ("curl -H 'Authorization: Bearer tok3n' https://api.example.com", "api.example.com"),
    ("upstream said 401 for bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "upstream said 401"),
    # password= / secret= / api_key= / token= pairs: in text, in query strings, JSON-ish.
    ("login failed: user=bob password=hunter2", "user=bob"),
    ("config secret=s3cr3t region=eu", "region=eu"),
    ("GET /v1/charges?api_key=ak_123&limit=10", "limit=10"),
    ("GET /v1/charges?limit=10&token=tok_123", "/v1/charges?limit=10"),
    ('{"password": "hunter2", "user": "bob"}', '"user": "bob"'),
    ("{'api_key': 'ak_123', 'user': 'bob'}", "'user': 'bob'"),
    ('payload {"token":"tok_123","id":7}', '"id":7'),
    # PostgreSQL URLs and keyword DSNs.
    ("could not connect to postgresql://app:pw123@db.internal:5432/app", "db.internal:5432/app"),
    ("could not connect to postgres://app:pw123@db.internal/app", "db.internal/app"),
    ("engine postgresql+psycopg://app:pw123@db/app failed", "postgresql+psycopg://app:"),
    ("dsn: host=db port=5432 user=app password=pw123 dbname=app", "dbname=app"),
]
SECRETS = ("x", "tok3n", "eyJhbGciOiJIUzI1NiJ9", "hunter2", "s3cr3t", "ak_123", "tok_123", "pw123")


@pytest.mark.parametrize(("text", "context"), CASES)
def test_each_named_secret_shape_is_redacted_and_its_context_kept(text: str, context: str) -> None:
    result = redact_text(text)
    assert REDACTED in result
    assert context in result
    leaked = [s for s in SECRETS if s in text and s in result and len(s) > 1]
    assert leaked == [], result
    if text.endswith("Bearer x"):
        assert result.endswith(f"Bearer {REDACTED}")
