"""``python -m bench.sqlite_index_use`` runs and lists every index of kickside_job with the
statements whose plan uses it, and the doc's table is its current output."""

from __future__ import annotations

import re

import pytest

from .scripts import ROOT, run_script

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "operating" / "sqlite.md"


def test_the_index_table_lists_every_index_and_the_hot_paths_that_use_them() -> None:
    result = run_script("bench.sqlite_index_use", "--markdown")
    assert result.returncode == 0, result.stderr
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(\w+)` \| .*? \| (.*) \|$", result.stdout, re.MULTILINE)
    }
    assert len(rows) == 10 and "10 indexes on kickside_job" in result.stdout
    assert "claim: `claim_jobs` UPDATE" in rows["ix_kickside_job_fetch"]
    assert "Stager: `stage_due` UPDATE" in rows["ix_kickside_job_fetch"]
    assert "Lifeline: `lock_expired_leases` SELECT" in rows["ix_kickside_job_lease"]
    by_id = rows["sqlite_autoindex_kickside_job_1"]
    assert "settle: `_settle_sqlite_batches` UPDATE (id=?)" in by_id
    assert "claim: `claim_jobs` UPDATE (id=?)" in by_id
    # The claim's update reads its candidates by id, not every available job by state.
    assert "claim: `claim_jobs` UPDATE (state=?)" not in rows["ix_kickside_job_fetch"]
    assert "enqueue: `insert_job` SELECT (unique_key=?)" in rows["uq_kickside_job_unique_key"]
    # The doc shows the same indexes, each used by the same parts of Kickside.
    doc = DOC.read_text()
    for name in rows:
        assert f"| `{name}` |" in doc, f"{name} is missing from {DOC.name}"
