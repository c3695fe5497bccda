"""Filters and search match literally: SQL and LIKE metacharacters are just characters.

Values and needles are drawn from an alphabet of troublemakers (``%``, ``_``, ``\\``, quotes,
``;``, brackets, regex characters, newlines) and compared with a plain Python oracle, through
the operator API and through the CLI, on SQLite and PostgreSQL. Each example works in a queue
of its own, so earlier examples never show up in its results.
"""

from __future__ import annotations

import json
import uuid

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, enqueue, list_slots
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, JobFilter, list_audit, list_jobs, record_audit
from kickside_tui.cli.main import app

from ..conftest import Target
from .support import PROPERTY, assert_consistent

# ASCII only: SQLite folds the case of ASCII letters only, so the oracle stays the same on both.
# No "v": the args key is "v", and keys are searched too.
ALPHABET = "%_\\'\"; -abAB()[]*?.^$|{}\n\t:,"
values = st.text(alphabet=ALPHABET, max_size=8)
needles = st.one_of(
    st.text(alphabet=ALPHABET, min_size=1, max_size=4),
    st.sampled_from(["%", "_", "\\", "%%", "\\%", "'", '"', "' OR '1'='1", "'; DROP TABLE x; --"]),
)
runner = CliRunner()
ME = Actor("literal", "localhost")


def _queue() -> str:
    return f"lit_{uuid.uuid4().hex[:12]}"


def _cli_ids(target: Target, *argv: str) -> set[str]:
    result = runner.invoke(app, [*target.cli_args(), *argv, "--json"])
    assert result.exit_code == 0, result.stderr
    return {j["id"] for j in json.loads(result.stdout)["jobs"]}


@PROPERTY
@given(stored=st.lists(values, min_size=1, max_size=6, unique=True), needle=needles)
def test_search_finds_exactly_the_values_that_contain_the_needle(
    db: Database, target: Target, stored: list[str], needle: str
) -> None:
    queue = _queue()
    by_id = {str(enqueue(db, JobBuilder("ok", {"v": v}).queue(queue)).id): v for v in stored}
    expected = {i for i, v in by_id.items() if needle.lower() in v.lower()}
    flt = JobFilter(queues=(queue,), search=needle)
    assert {str(j.id) for j in list_jobs(db, flt, limit=100).jobs} == expected
    assert _cli_ids(target, "jobs", "--queue", queue, "--search", needle) == expected
    assert_consistent(db)


@PROPERTY
@given(stored=st.lists(values.filter(bool), min_size=1, max_size=6, unique=True), needle=needles)
def test_tags_match_whole_and_literally(
    db: Database, target: Target, stored: list[str], needle: str
) -> None:
    queue = _queue()
    by_id = {str(enqueue(db, JobBuilder("ok", {}).queue(queue).tag(t)).id): t for t in stored}
    expected = {i for i, t in by_id.items() if t == needle}
    flt = JobFilter(queues=(queue,), tags=(needle,))
    assert {str(j.id) for j in list_jobs(db, flt, limit=100).jobs} == expected
    assert _cli_ids(target, "jobs", "--queue", queue, "--tag", needle) == expected
    # States, queues and workers are exact names too: a pattern selects nothing.
    assert list_jobs(db, JobFilter(queues=(needle,), workers=(needle,))).jobs == []
    assert_consistent(db)


@PROPERTY
@given(
    scopes=st.lists(values.filter(str.strip), min_size=1, max_size=4, unique=True), needle=needles
)
def test_slot_identities_and_audit_targets_match_exactly(
    db: Database, target: Target, scopes: list[str], needle: str
) -> None:
    namespace = _queue()
    for scope in scopes:
        enqueue(db, JobBuilder("ok", {}).slot(namespace, scope, "key"))
        with db.begin() as conn:
            record_audit(db, conn, ME, "probe", "slot", f"{namespace}|{scope}", {}, utcnow())
    found = {s.scope for s in list_slots(db, namespace=namespace, scope=needle)}
    assert found == ({needle} & set(scopes))
    result = runner.invoke(
        app, [*target.cli_args(), "slots", "--namespace", namespace, "--scope", needle, "--json"]
    )
    assert result.exit_code == 0, result.stderr
    assert {s["scope"] for s in json.loads(result.stdout)["slots"]} == found
    entries = list_audit(db, action="probe", target=f"{namespace}|{needle}").entries
    assert {e.target for e in entries} == (
        {f"{namespace}|{needle}"} & {f"{namespace}|{s}" for s in scopes}
    )
    assert list_audit(db, action=needle).entries == []
    assert_consistent(db)
