"""The engine stays independent of the UI; the UI reaches data only through the engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UI_FORBIDDEN = ("sqlalchemy", "psycopg", "psycopg_pool", "alembic", "sqlite3")


def test_importing_the_engine_loads_no_ui_library() -> None:
    code = (
        "import sys, kickside_engine, kickside_engine.migrate\n"
        "import kickside_engine.store.database\n"
        "bad = [m for m in ('textual', 'typer', 'rich', 'click') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"kickside_engine imported UI libraries: {out}"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_tui_and_cli_import_no_database_library() -> None:
    offenders = {}
    for path in sorted((ROOT / "kickside_tui").rglob("*.py")):
        bad = _imports(path) & set(UI_FORBIDDEN)
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_the_engine_imports_nothing_from_the_ui_package() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "kickside_engine").rglob("*.py"))
        if _imports(p) & {"kickside_tui", "textual", "typer", "rich", "click"}
    ]
    assert offenders == []
