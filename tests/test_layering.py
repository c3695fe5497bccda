"""The engine stays independent of the UI; the UI reaches data only through the engine."""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from collections.abc import Iterator
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


def test_the_engine_loads_opentelemetry_only_for_an_application_that_imports_it() -> None:
    code = (
        "import sys, kickside_engine, kickside_engine.runtime, kickside_engine.testing\n"
        "import kickside_engine.telemetry\n"
        "kickside_engine.WorkerRegistry()\n"
        "print('opentelemetry' in sys.modules)\n"
        "import kickside_engine.telemetry.otel\n"
        "print('opentelemetry' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True"]


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


# --- import circles ---------------------------------------------------------------------------

#: Import circles tolerated for now, each as the sorted modules of one strongly connected
#: component. This set may only shrink: the test fails on any other circle, and on a listed one
#: that is gone (delete its entry then). It held ("kickside_engine.enqueue",
#: "kickside_engine.slots", "kickside_engine.workers") until the layout redesign removed that
#: circle (issue 20); keep it empty.
KNOWN_CIRCLES: set[tuple[str, ...]] = set()
PACKAGES = ("kickside_engine", "kickside_tui")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The names an import statement may load as modules (filtered to ours by the caller)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    # `from package import submodule` loads the submodule as well as the package.
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _imports_that_run(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements under ``node``, at any depth, except under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.orelse:  # the `else:` does run
                yield from _imports_that_run(ast.Module(body=[statement], type_ignores=[]))
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _imports_that_run(child)


def _import_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """Every module of ours -> the modules of ours it imports, and where each edge is written."""
    paths = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    where: dict[tuple[str, str], str] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in _imports_that_run(tree):
            for name in _imported(node, module, path.name == "__init__.py"):
                if name in graph and name != module:
                    graph[module].add(name)
                    where.setdefault((module, name), f"{path.relative_to(ROOT)}:{node.lineno}")
    return graph, where


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest way from the component's first module back to itself, for the report."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"no cycle in {component}")


def test_no_import_circles_beyond_the_known_ones() -> None:
    """No import circle among kickside_engine's and kickside_tui's modules (beyond the list).

    Counted: every import that runs, at module level or inside a function. A function-level
    import only postpones the circle to the first call; the modules still need each other, so
    their layers are still tangled (moving an import into a function is how a circle hides).
    Not counted: imports under ``if TYPE_CHECKING:``, which never run, and the implicit import
    of a module's parent packages (a package's ``__init__`` re-exporting its own submodules is
    not a circle; an explicit ``from kickside_engine.control import x`` inside ``control`` is).
    """
    graph, where = _import_graph()
    found = {tuple(component) for component in _circles(graph)}
    report = []
    for component in sorted(found - KNOWN_CIRCLES):
        cycle = _one_cycle(graph, list(component))
        steps = [f"    {a} -> {b}  ({where[a, b]})" for a, b in itertools.pairwise(cycle)]
        report.append(f"  circle among {', '.join(component)}, e.g.:\n" + "\n".join(steps))
    for component in sorted(KNOWN_CIRCLES - found):
        report.append(f"  gone, delete it from KNOWN_CIRCLES: {', '.join(component)}")
    assert not report, "import circles changed:\n" + "\n".join(report)


# --- doors and layers -------------------------------------------------------------------------

#: The engine modules the dashboard and the CLI may import: the application API (the names in
#: ``kickside_engine.__all__``), the operator API, the pool and the database configuration.
UI_DOORS = frozenset(
    {
        "kickside_engine",
        "kickside_engine.control",
        "kickside_engine.runtime",
        "kickside_engine.config",
    }
)
#: What ``store/`` may import besides itself: modules that import nothing of the engine above
#: them (the vocabulary, final-state values, errors, clock, ids, text checks, redaction, the
#: database URL). The
#: modules of the ``redact`` package count as ``redact`` (:func:`_is_foundation`).
STORE_FOUNDATION = frozenset(
    {
        "kickside_engine.clock",
        "kickside_engine.config",
        "kickside_engine.errors",
        "kickside_engine.finality",
        "kickside_engine.ids",
        "kickside_engine.models",
        "kickside_engine.redact",
        "kickside_engine.text",
    }
)
#: Where SQL is written: the store, the operator API (its reads) and the migrations.
SQL_HOMES = ("kickside_engine.store", "kickside_engine.control", "kickside_engine.migrations")
SQL_BUILDERS = frozenset(
    {
        "and_", "bindparam", "case", "cast", "column", "delete", "distinct", "exists", "func",
        "insert", "literal", "literal_column", "not_", "or_", "select", "table", "text",
        "true", "false", "tuple_", "update",
    }
)  # fmt: skip


def _engine_imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of an engine module in ``path`` that runs."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in _imports_that_run(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "kickside_engine":
                yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kickside_engine":
                    yield node.lineno, alias.name, []


def test_the_tui_and_cli_reach_the_engine_only_through_its_doors() -> None:
    import kickside_engine

    offenders = []
    for path in sorted((ROOT / "kickside_tui").rglob("*.py")):
        for line, module, names in _engine_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if module not in UI_DOORS:
                offenders.append(f"{where} imports {module}")
            elif module == "kickside_engine":
                offenders += [
                    f"{where} imports kickside_engine.{n} (not in its __all__)"
                    for n in names
                    if n not in kickside_engine.__all__
                ]
    assert offenders == [], "\n".join(offenders)


def _is_foundation(module: str) -> bool:
    return module in STORE_FOUNDATION or module.startswith("kickside_engine.redact.")


def test_the_store_imports_nothing_above_it() -> None:
    offenders = []
    for path in sorted((ROOT / "kickside_engine" / "store").rglob("*.py")):
        for line, module, _names in _engine_imports(path):
            if not module.startswith("kickside_engine.store") and not _is_foundation(module):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert offenders == [], "\n".join(offenders)


REDACT_MAY_IMPORT = frozenset({"kickside_engine.errors", "kickside_engine.redact"})


def test_redaction_imports_only_the_errors() -> None:
    """Every layer redacts, the store and the configuration included: ``redact`` (a package)
    may import only its own modules and the errors, never anything that imports it back."""
    offenders = []
    for path in sorted((ROOT / "kickside_engine" / "redact").rglob("*.py")):
        for line, module, _names in _engine_imports(path):
            if module not in REDACT_MAY_IMPORT and not module.startswith("kickside_engine.redact."):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert offenders == [], "\n".join(offenders)


def test_sql_is_written_only_in_the_store_the_operator_api_and_the_migrations() -> None:
    offenders = []
    for path in sorted((ROOT / "kickside_engine").rglob("*.py")):
        module = _module_name(path)
        if module.startswith(SQL_HOMES) or module == "kickside_engine.migrate":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                built = sorted({a.name for a in node.names} & SQL_BUILDERS)
                if built:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} builds SQL: {built}")
            elif isinstance(node, ast.Attribute) and node.attr == "exec_driver_sql":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} runs driver SQL")
    assert offenders == [], "\n".join(offenders)
