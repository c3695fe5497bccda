"""The Guarantees page (docs/about/guarantees.md) names tests that exist (so a rename cannot
orphan a promise)."""

from __future__ import annotations

import re

from ..support.processes import ROOT


def test_every_test_the_guarantees_name_exists() -> None:
    section = (ROOT / "docs" / "about" / "guarantees.md").read_text()
    references = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", section)
    assert len(references) >= 12
    for path, name in references:
        source = (ROOT / path).read_text()
        if name:
            assert re.search(rf"^(async )?def {name}\(", source, re.MULTILINE), f"{path}::{name}"
    rows = [line for line in section.splitlines() if line.startswith("| **")]
    assert all("`tests/" in row for row in rows), "every promise names its proof"
