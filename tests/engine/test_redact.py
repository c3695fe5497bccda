"""One redaction for errors, args, logs, CLI and TUI: secrets go, context stays."""

from __future__ import annotations

import copy
import string
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kickside_engine.redact import (
    REDACTED,
    REDACTED_ARGS_META,
    SENSITIVE_KEYS_META,
    declared_sensitive_keys,
    is_sensitive_key,
    redact_args,
    redact_meta,
    redact_text,
    redact_value,
    truncate,
)

# No example database: the suite leaves nothing behind; no deadline: CI machines vary.
PROPERTY = settings(database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- the seed example --------------------------------------------------------------------


def test_a_worker_error_keeps_its_cause_and_host_but_loses_its_secrets() -> None:
    error = (
        "RuntimeError: charge failed for "
        "https://deploy:not-a-password@api.example.com/v1/charges?token=not-a-token"
    )
    result = redact_text(error)
    assert "not-a-password" not in result
    assert "not-a-token" not in result
    assert "api.example.com/v1/charges" in result
    assert "charge failed" in result
    assert result == (
        "RuntimeError: charge failed for "
        "https://deploy:[REDACTED]@api.example.com/v1/charges?token=[REDACTED]"
    )


# --- credentials in URLs -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "https://deploy:not-a-password@api.example.com/v1/charges",
            "https://deploy:[REDACTED]@api.example.com/v1/charges",
        ),
        ("postgresql://user:pw@host:5432/db", "postgresql://user:[REDACTED]@host:5432/db"),
        (
            "postgresql+psycopg://app:s3cret@db.internal/app",
            "postgresql+psycopg://app:[REDACTED]@db.internal/app",
        ),
        ("redis://:pw@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        ("amqp://guest:guest@rabbit//", "amqp://guest:[REDACTED]@rabbit//"),
        (
            "could not connect to mysql://root:toor@db",
            "could not connect to mysql://root:[REDACTED]@db",
        ),
        ("https://u:p@ss@host/x", "https://u:[REDACTED]@host/x"),
        (
            "a https://a:one@h1/x and https://b:two@h2/y",
            "a https://a:[REDACTED]@h1/x and https://b:[REDACTED]@h2/y",
        ),
    ],
)
def test_url_passwords_are_redacted_and_users_kept(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "https://user@host/path",
        "postgresql://app@db/app",
        "https://host:8443/path?q=1",
        "https://example.com/a:b/c@d",
        "see http://host:8080 and mail me at bob@example.com",
    ],
)
def test_urls_without_a_password_are_unchanged(text: str) -> None:
    assert redact_text(text) == text


# --- key=value and key: value --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2", "password=[REDACTED]"),
        ("PASSWORD=hunter2", "PASSWORD=[REDACTED]"),
        ('{"api_key": "abc123", "name": "x"}', '{"api_key": "[REDACTED]", "name": "x"}'),
        ("{'password': 'x', 'user': 'bob'}", "{'password': '[REDACTED]', 'user': 'bob'}"),
        ("secret: s3cr3t", "secret: [REDACTED]"),
        ("?access_token=abc&x=1", "?access_token=[REDACTED]&x=1"),
        ("passwd=a pwd=b", "passwd=[REDACTED] pwd=[REDACTED]"),
        ("client_secret=a,private_key=b", "client_secret=[REDACTED],private_key=[REDACTED]"),
        ("apikey=a;api-key=b", "apikey=[REDACTED];api-key=[REDACTED]"),
        ("access_key=a}", "access_key=[REDACTED]}"),
        ("(auth=a) [credentials=b]", "(auth=[REDACTED]) [credentials=[REDACTED]]"),
        ("credential: a", "credential: [REDACTED]"),
        ("session=a cookie=b", "session=[REDACTED] cookie=[REDACTED]"),
        ("signature=a&sig=b&key=c", "signature=[REDACTED]&sig=[REDACTED]&key=[REDACTED]"),
        ("db_password=a", "db_password=[REDACTED]"),
        ("X-Api-Key: abc", "X-Api-Key: [REDACTED]"),
        ("stripe.secret=abc", "stripe.secret=[REDACTED]"),
        ("sessionid=abc;path=/", "sessionid=[REDACTED];path=/"),
        ("refresh_token=a&token_count=3", "refresh_token=[REDACTED]&token_count=3"),
        ("--password=hunter2 --user=bob", "--password=[REDACTED] --user=bob"),
        ("db_password: 'correct horse battery'", "db_password: '[REDACTED]'"),
        ('"token": "a \\" b"', '"token": "[REDACTED]"'),
        ("apiKey=a accessToken=b", "apiKey=[REDACTED] accessToken=[REDACTED]"),
        ("PGPASSWORD=abc", "PGPASSWORD=[REDACTED]"),
        ("password=[abc]", "password=[REDACTED]"),
        ("auth: https://u:p@h/x", "auth: [REDACTED]"),
        ("token=a=b==", "token=[REDACTED]"),
        ('password="unterminated', 'password="[REDACTED]'),
    ],
)
def test_values_of_sensitive_keys_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_postgresql_keyword_connection_strings() -> None:
    assert (
        redact_text("host=db user=app password=pw dbname=x")
        == "host=db user=app password=[REDACTED] dbname=x"
    )
    assert (
        redact_text("host=db password='p w' dbname=x") == "host=db password='[REDACTED]' dbname=x"
    )


@pytest.mark.parametrize("text", ["password=", 'password=""', "token = ", "secret:"])
def test_empty_values_stay_empty(text: str) -> None:
    assert redact_text(text) == text


# --- authorization schemes -----------------------------------------------------------------

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Authorization: Bearer {JWT}", "Authorization: Bearer [REDACTED]"),
        ("authorization: bearer abc", "authorization: bearer [REDACTED]"),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED]"),
        ('"Authorization": "Bearer abc def"', '"Authorization": "Bearer [REDACTED]"'),
        ("curl -H 'Authorization: Token abc' x", "curl -H 'Authorization: Token [REDACTED]' x"),
        ("sent Bearer abc123def to the API", "sent Bearer [REDACTED] to the API"),
        ("retrying with Basic dXNlcjpwYXNz", "retrying with Basic [REDACTED]"),
        ("Token 9f8e7d6c5b4a rejected", "Token [REDACTED] rejected"),
        ("Bearer Bearer abc123", "Bearer Bearer [REDACTED]"),
        ("Bearer abc123.", "Bearer [REDACTED]."),
    ],
)
def test_authorization_credentials_are_redacted_and_schemes_kept(text: str, expected: str) -> None:
    assert redact_text(text) == expected


# --- token shapes --------------------------------------------------------------------------

TOKENS = [
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "gho_" + "a" * 36,
    "ghs_" + "Z9" * 18,
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
    "xoxp-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
    "rk_live_abcdefgh12345678",
    JWT,
]


@pytest.mark.parametrize("token", TOKENS)
def test_well_known_token_shapes_are_redacted_without_a_key(token: str) -> None:
    result = redact_text(f"deploy failed with {token} on host-7")
    assert result == "deploy failed with [REDACTED] on host-7"


@pytest.mark.parametrize("kind", ["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "])
def test_private_key_blocks_are_redacted(kind: str) -> None:
    text = (
        f"bad key: -----BEGIN {kind}PRIVATE KEY-----\n"
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
        "Proc-Type: 4,ENCRYPTED\n"
        f"-----END {kind}PRIVATE KEY-----\nnext line"
    )
    assert redact_text(text) == "bad key: [REDACTED PRIVATE KEY]\nnext line"


def test_a_private_key_without_its_footer_is_redacted_to_the_end() -> None:
    text = "loaded -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B"
    assert redact_text(text) == "loaded [REDACTED PRIVATE KEY]"


def test_public_keys_and_certificates_are_left_alone() -> None:
    text = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0C\n-----END PUBLIC KEY-----"
    assert redact_text(text) == text


# --- ordinary text stays ordinary ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "the token bucket is empty",
        "passwordless login",
        "keyboard",
        "monkey=1",
        "author=alice",
        "primary_key=5 sort_key=name",
        "tokenizer=bpe",
        "max_tokens=100",
        "Token expired",
        "Basic setup done",
        "the bearer token is missing",
        "token == expected",
        "error at 12:30:00 on host:5432",
        "job 42 failed: ZeroDivisionError: division by zero",
        "tokens: ['a', 'b']",
        "",
        "\u00fcber na\u00efve caf\u00e9 \U0001f600",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


# --- sensitive keys --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "Password",
        "db_password",
        "PGPASSWORD",
        "password2",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "client_secret",
        "stripe.secret",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "accessToken",
        "csrftoken",
        "api_key",
        "stripe_api_key",
        "apikey",
        "api-key",
        "X-Api-Key",
        "apiKey",
        "APIKey",
        "access_key",
        "secret_access_key",
        "master_key",
        "private_key",
        "auth",
        "basic_auth",
        "proxy_auth",
        "Authorization",
        "credential",
        "credentials",
        "cookie",
        "Set-Cookie",
        "signature",
        "X-Hub-Signature",
        "X-Hub-Signature-256",
        "--password",
    ],
)
def test_sensitive_keys(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "name",
        # Data that merely mentions a sensitive word: a key is what its last word names.
        "token_count",
        "auth_provider",
        "session_id",
        "sessionId",
        "session",
        "max_tokens",
        "token_type",
        "token_expires_at",
        "secret_name",
        "api_key_id",
        "private_key_id",
        "aws_access_key_id",
        "password_reset_sent_at",
        # Fields of args that are usually data (an object key, a chat session); in free text,
        # "key=" and "sig=" are still redacted (test_values_of_sensitive_keys_are_redacted).
        "key",
        "KEY",
        "sig",
        "monkey",
        "keyboard",
        "author",
        "authority",
        "passwordless",
        "tokenizer",
        "primary_key",
        "key_id",
        "signal",
        "design",
        "sig_count_total",
        "user",
        "host",
    ],
)
def test_ordinary_keys(key: str) -> None:
    assert not is_sensitive_key(key)


def test_the_issue_example_is_data_and_the_secrets_beside_it_are_not() -> None:
    args = {
        "session_id": 42,
        "token_count": 1200,
        "auth_provider": "google",
        "refresh_token": "1//0g-not-a-token",
        "stripe_api_key": "not-a-key",
        "accessToken": "not-an-access-token",
    }
    assert redact_value(args) == {
        "session_id": 42,
        "token_count": 1200,
        "auth_provider": "google",
        "refresh_token": REDACTED,
        "stripe_api_key": REDACTED,
        "accessToken": REDACTED,
    }


@pytest.mark.parametrize(
    ("key", "declared", "expected"),
    [
        ("ssn", ["ssn"], True),
        ("SSN", ["ssn"], True),
        ("customer_ssn", ["ssn"], True),
        ("customerSsn", ["ssn"], True),
        ("ssn_verified", ["ssn"], False),
        ("lessn", ["ssn"], False),
        ("card_number", ["card_number"], True),
        ("backupCardNumber", ["card-number"], True),
        ("number", ["card_number"], False),
        ("ssn", [], False),
    ],
)
def test_declared_names_match_by_whole_words(key: str, declared: list[str], expected: bool) -> None:
    assert is_sensitive_key(key, declared) is expected


def test_declared_names_are_redacted_in_values_and_in_free_text() -> None:
    args = {"customer": {"ssn": "078-05-1120", "name": "Ada"}, "note": "ssn=078-05-1120 ok"}
    assert redact_value(args, ["ssn"]) == {
        "customer": {"ssn": REDACTED, "name": "Ada"},
        "note": "ssn=[REDACTED] ok",
    }
    assert redact_value(args) == args  # not declared: ordinary data
    assert redact_text("bad ssn: '078-05-1120'", {"ssn"}) == "bad ssn: '[REDACTED]'"
    assert redact_text("bad ssn: '078-05-1120'") == "bad ssn: '078-05-1120'"


def test_a_jobs_meta_says_how_its_args_and_meta_are_shown() -> None:
    meta = {
        SENSITIVE_KEYS_META: ["ssn"],
        REDACTED_ARGS_META: {"ssn": REDACTED},
        "password": "pw",
        "ssn": "1",
    }
    assert declared_sensitive_keys(meta) == ("ssn",)
    assert redact_args({"ssn": "078-05-1120", "n": 1}, meta) == {"ssn": REDACTED, "n": 1}
    # The search copy repeats the args: not shown twice.
    assert redact_meta(meta) == {
        SENSITIVE_KEYS_META: ["ssn"],
        "password": REDACTED,
        "ssn": REDACTED,
    }
    # Malformed declarations are ignored, never an error on the way out.
    for odd in ({SENSITIVE_KEYS_META: "ssn"}, {SENSITIVE_KEYS_META: [1, None, ""]}, {}):
        assert declared_sensitive_keys(odd) == ()
    assert redact_args({"ssn": "1"}, None) == {"ssn": "1"}


def test_a_bearer_credential_under_an_ordinary_key_is_still_redacted_by_its_shape() -> None:
    assert redact_value({"auth_header": "Bearer dXNlcjpwYXNzd29yZA=="}) == {
        "auth_header": "Bearer [REDACTED]"
    }


# --- idempotence, robustness, speed --------------------------------------------------------

SAMPLES = [
    "RuntimeError: charge failed for "
    "https://deploy:not-a-password@api.example.com/v1/charges?token=not-a-token",
    f"Authorization: Bearer {JWT}",
    '{"api_key": "abc123", "nested": {"password": "p w"}}',
    "auth: https://u:p@h/x",
    "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----",
    "Bearer my_token=abc",
    'https://u:password="a b"@host/x',
    "AKIA0000000000000000_key://",
    *TOKENS,
]


@pytest.mark.parametrize("text", SAMPLES)
def test_redaction_is_idempotent_on_examples(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@pytest.mark.parametrize(
    "text",
    [
        "\ud800",
        "password=\udfff\ud800",
        "https://u:\ud83d@h/",
        "Bearer \udc00abc123",
        "\x00password=\x00",
        "token=\u2028secret",
        "p\u00e4ssw\u00f6rd=\u00fc k\u212aey=1",
    ],
)
def test_unusual_code_points_never_raise(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


def _repeat(piece: str, size: int = 1_000_000) -> str:
    return (piece * (size // len(piece) + 1))[:size]


ADVERSARIAL = {
    "one long word": "a" * 1_000_000,
    "keys without values": _repeat("password "),
    "many short pairs": _repeat("a=b:"),
    "sensitive pairs": _repeat("secret:x,"),
    "unterminated quotes": _repeat('password="x '),
    "escapes": _repeat('token="\\'),
    "schemes": _repeat("://a:"),
    "at signs": _repeat("://a:@@"),
    "long authority": "https://u:" + "p" * 1_000_000,
    "pem headers": _repeat("-----BEGIN PRIVATE KEY-----"),
    "pem blocks": _repeat("-----BEGIN PRIVATE KEY-----x-----END PRIVATE KEY-----"),
    "jwt starts": _repeat("eyJ"),
    "jwt segments": _repeat("eyJa."),
    "bearers": _repeat("Bearer "),
    "brackets": "token=" + "[" * 1_000_000,
    "token prefixes": _repeat("ghp_xoxb-AKIAsk_live_"),
    "mixed": _repeat('auth: Bearer Bearer https://a:b@ ghp_ "token": "eyJ. \ud800'),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_a_megabyte_of_adversarial_input_is_redacted_quickly(name: str) -> None:
    # A safety check against catastrophic backtracking, not a benchmark.
    text = ADVERSARIAL[name]
    started = time.monotonic()
    redact_text(text)
    assert time.monotonic() - started < 5.0


# --- properties ------------------------------------------------------------------------------

FRAGMENTS = [
    "password", "token", "key", "sig", "auth", "session", "Api", "_key", "=", ":", ": ", " ",
    "\t", "\n", '"', "'", "\\", "[", "]", "{", "}", "(", ")", "&", ",", ";", "@", "://", "/",
    "?", "#", ".", "-", "_", "==", "https", "user", "Bearer ", "Basic ", "Token ", "abc123",
    "X", "eyJ", "ghp_", "a" * 20, "AKIA", "0" * 16, "sk_live_", "xoxb-", REDACTED,
    "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "PRIVATE KEY", "\u00fc",
    "\ud800", "https://u:", "@h",
]  # fmt: skip
ANY_TEXT = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"])))
TRICKY_TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.characters()), max_size=30).map(
    "".join
)


@PROPERTY
@given(st.one_of(ANY_TEXT, TRICKY_TEXT))
def test_redact_text_never_raises_and_returns_text(text: str) -> None:
    assert isinstance(redact_text(text), str)


@settings(PROPERTY, max_examples=500)
@given(st.one_of(ANY_TEXT, TRICKY_TEXT))
def test_redact_text_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


SECRETS = st.text(string.ascii_letters + string.digits, min_size=6, max_size=40)


@PROPERTY
@given(
    secret=SECRETS,
    template=st.sampled_from(["https://user:{}@host/", "password={}"]),
    before=st.one_of(ANY_TEXT, TRICKY_TEXT),
    after=st.one_of(ANY_TEXT, TRICKY_TEXT),
)
def test_generated_secrets_never_survive(
    secret: str, template: str, before: str, after: str
) -> None:
    # Every word the output can contain besides the secret itself.
    assume(
        secret
        not in f"{before} {after} https://user:@host/ password= {REDACTED} [REDACTED PRIVATE KEY]"
    )
    text = f"{before} {template.format(secret)} {after}"
    assert secret not in redact_text(text)


# --- structured values -----------------------------------------------------------------------


def test_redact_value_redacts_sensitive_keys_whatever_the_value() -> None:
    args = {
        "user": "bob",
        "password": "hunter2",
        "api_key": 12345,
        "token": None,
        "credentials": {"user": "x", "pass": "y"},
        "cookies": ["a", "b"],
        "retry": True,
        "attempts": 3,
        "ratio": 0.5,
        "nothing": None,
    }
    assert redact_value(args) == {
        "user": "bob",
        "password": REDACTED,
        "api_key": REDACTED,
        "token": None,
        "credentials": REDACTED,
        "cookies": REDACTED,
        "retry": True,
        "attempts": 3,
        "ratio": 0.5,
        "nothing": None,
    }


def test_redact_value_redacts_every_string_and_keeps_shapes() -> None:
    value = {
        "url": "postgresql://app:pw@db/app",
        "steps": ["ok", "Authorization: Bearer abc", ("password=x", 1)],
        "nested": {"deeper": [{"X-Api-Key": "k"}, "sk_live_4eC39HqLyjWDarjtT1zdp7dc"]},
        7: "key=v",
    }
    assert redact_value(value) == {
        "url": "postgresql://app:[REDACTED]@db/app",
        "steps": ["ok", "Authorization: Bearer [REDACTED]", ("password=[REDACTED]", 1)],
        "nested": {"deeper": [{"X-Api-Key": REDACTED}, REDACTED]},
        7: "key=[REDACTED]",
    }


def test_redact_value_handles_scalars_and_foreign_objects() -> None:
    marker = object()
    assert redact_value("password=x") == "password=[REDACTED]"
    assert redact_value(None) is None
    assert redact_value(3) == 3
    assert redact_value(True) is True
    assert redact_value(marker) is marker
    assert redact_value(b"password=x") == b"password=x"
    assert redact_value(("token=a", ["b"])) == ("token=[REDACTED]", ["b"])


def test_redact_value_never_mutates_its_input() -> None:
    value: dict[str, Any] = {
        "password": "x",
        "list": ["token=a", {"secret": [1, 2]}],
        "tuple": ("key=b",),
    }
    before = copy.deepcopy(value)
    result = redact_value(value)
    assert value == before
    assert isinstance(result, dict)
    assert result is not value
    assert result["list"] is not value["list"]
    assert result["list"][1] is not value["list"][1]


@pytest.mark.parametrize("depth", [200, 5_000])
def test_redact_value_handles_deep_nesting(depth: int) -> None:
    value: Any = "password=x"
    for level in range(depth):
        value = {"child": value} if level % 2 else [value]
    result: Any = redact_value(value)
    for level in reversed(range(depth)):
        result = result["child"] if level % 2 else result[0]
    assert result == "password=[REDACTED]"


def test_redact_value_survives_cycles() -> None:
    loop: list[Any] = ["token=a"]
    loop.append(loop)
    assert redact_value(loop) == ["token=[REDACTED]", REDACTED]


def test_redact_value_shares_shared_containers_once() -> None:
    shared = ["password=x"]
    assert redact_value({"a": shared, "b": shared}) == {
        "a": ["password=[REDACTED]"],
        "b": ["password=[REDACTED]"],
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.one_of(st.sampled_from(FRAGMENTS), ANY_TEXT), children, max_size=4)
    ),
    max_leaves=20,
)


@PROPERTY
@given(JSON)
def test_redact_value_never_raises_never_mutates_and_is_idempotent(value: object) -> None:
    before = copy.deepcopy(value)
    once = redact_value(value)
    assert value == before
    assert redact_value(once) == once


# --- truncation ------------------------------------------------------------------------------

MARKER = "\u2026[truncated]"


def test_short_text_is_not_truncated() -> None:
    assert truncate("hello") == "hello"
    assert truncate("x" * 4096) == "x" * 4096
    assert truncate("\u00e9" * 2048) == "\u00e9" * 2048


def test_long_text_keeps_its_start_and_fits_the_limit() -> None:
    result = truncate("abcdefghij" * 1000, 100)
    assert result.endswith(MARKER)
    assert result.startswith("abcdefghij")
    assert len(result.encode()) == 100


@pytest.mark.parametrize("limit", range(14, 40))
@pytest.mark.parametrize("char", ["\u00e9", "\u20ac", "\U0001f600", "\ud800"])
def test_multi_byte_characters_are_never_split(limit: int, char: str) -> None:
    result = truncate("ab" + char * 50, limit)
    encoded = result.encode("utf-8", "surrogatepass")
    assert len(encoded) <= limit
    assert result.endswith(MARKER)
    body = result.removesuffix(MARKER)
    assert ("ab" + char * 50).startswith(body)


def test_tiny_limits() -> None:
    assert truncate("abc", 0) == ""
    assert truncate("abc", -5) == ""
    assert truncate("x" * 100, 5) == "xxxxx"
    assert truncate("\u20ac" * 10, 4) == "\u20ac"


@PROPERTY
@given(ANY_TEXT, st.integers(min_value=0, max_value=200))
def test_truncate_always_fits_and_keeps_a_prefix(text: str, limit: int) -> None:
    result = truncate(text, limit)
    assert len(result.encode("utf-8", "surrogatepass")) <= limit
    if result != text:
        assert text.startswith(result.removesuffix(MARKER))
