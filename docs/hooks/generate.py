"""The site's MkDocs hook: pages say ``<!-- generate: NAME -->`` where the code writes them.

Generated from the code at every build, so they cannot drift from it:

- ``cli``, ``exit-codes``, ``environment``, ``pool-config``: see :mod:`cli_reference`;
- ``states``: the state machine, a diagram drawn from ``kickside_engine.models.TRANSITIONS``;
- ``schema``: the tables of ``kickside_engine/store/tables.py``, with their PostgreSQL DDL;
- ``dashboard-keys``: every key the dashboard binds, from its screens' ``BINDINGS``.

The hook also adds the dashboard screenshots (``screenshots/``) and the latest benchmark plot
to the site, from where ``scripts/screenshots.py`` and ``bench`` write them. A page that asks
for a name this hook does not know fails the build.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cli_reference
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generate: ([\w-]+) -->$", re.MULTILINE)
#: The benchmark plot the Performance page shows (the latest full run's).
BENCH_PLOT = "bench/results/2026-12-01T05-34-21Z.png"
#: Sphinx roles in docstrings (``:class:`Job```) rendered by Markdown as ``:class:<code>``.
ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>~?([^<]+)</code>")


def states() -> str:
    """The job state machine: a Mermaid diagram of ``TRANSITIONS`` and a table of the states."""
    from kickside_engine.models import FINAL_STATES, SLOT_ONLY_STATES, TRANSITIONS
    from kickside_tui.screens.help import MEANINGS

    lines = ["```mermaid", "stateDiagram-v2"]
    for source, targets in TRANSITIONS.items():
        for target in sorted(targets):
            lines.append(f"    {source.value} --> {target.value}")
    lines += [
        "    classDef final fill:#e8e8e8,stroke:#555",
        "    classDef slot stroke-dasharray:4 3",
        f"    class {','.join(sorted(s.value for s in FINAL_STATES))} final",
        f"    class {','.join(sorted(s.value for s in SLOT_ONLY_STATES))} slot",
        "```",
        "",
        "| state | meaning | may move to |",
        "| --- | --- | --- |",
    ]
    for state, targets in TRANSITIONS.items():
        tags = [" (final)" if state in FINAL_STATES else "", " (slots only)"][
            state in SLOT_ONLY_STATES
        ]
        moves = ", ".join(f"`{t.value}`" for t in sorted(targets))
        lines.append(f"| `{state.value}`{tags} | {MEANINGS[state]} | {moves} |")
    return "\n".join(lines) + "\n"


def _type(column: Any, dialect: Any) -> str:
    return str(column.type.compile(dialect=dialect))


def schema() -> str:
    """Every table: its columns (PostgreSQL and SQLite types), constraints and indexes."""
    from sqlalchemy.dialects import postgresql, sqlite
    from sqlalchemy.schema import CreateIndex, CreateTable

    from kickside_engine.store.tables import Tables, build_tables

    pg, lite = postgresql.dialect(), sqlite.dialect()  # type: ignore[no-untyped-call]
    out: list[str] = []
    tables = build_tables(None)
    for field in dataclasses.fields(Tables)[1:]:  # after the metadata, in the dataclass's order
        table = getattr(tables, field.name)
        out += [f"## `{table.name}`", ""]
        out += [
            "| column | PostgreSQL | SQLite | null | default |",
            "| --- | --- | --- | --- | --- |",
        ]
        for column in table.columns:
            name = f"**`{column.name}`**" if column.primary_key else f"`{column.name}`"
            arg = getattr(column.server_default, "arg", None)
            shown = "" if arg is None else f"`{arg if isinstance(arg, str) else arg.compile()}`"
            null = "yes" if column.nullable else ""
            out.append(
                f"| {name} | `{_type(column, pg)}` | `{_type(column, lite)}` | {null} | {shown} |"
            )
        out.append("")
        ddl = [str(CreateTable(table).compile(dialect=pg)).strip() + ";"]
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            ddl.append(str(CreateIndex(index).compile(dialect=pg)).strip() + ";")
        out += ['??? note "PostgreSQL DDL (constraints and indexes)"', "", "    ```sql"]
        out += ["    " + line if line else "" for line in "\n\n".join(ddl).splitlines()]
        out += ["    ```", ""]
    return "\n".join(out)


def _bindings(cls: type) -> Iterator[Any]:
    """The bindings a class of the dashboard declares and inherits from the dashboard's own
    classes (not Textual's defaults, such as focus and scrolling), the nearest class's first."""
    from textual.binding import Binding

    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("kickside_tui"):
            continue
        for binding in vars(klass).get("BINDINGS", []):
            if not isinstance(binding, Binding) or binding.key in seen:
                continue
            seen.add(binding.key)
            if binding.action.startswith(("capital(", "caps_lock(")):
                continue  # capital letters are bound to do nothing (Caps Lock)
            yield binding


def _keys(binding: Any) -> str:
    from textual.keys import format_key

    return " ".join(f"`{format_key(k.strip())}`" for k in binding.key.split(","))


def dashboard_keys() -> str:
    """Every key of the dashboard, by where it works."""
    from kickside_tui.app import SCREENS, KicksideApp
    from kickside_tui.screens.confirm import ConfirmScreen
    from kickside_tui.screens.job import JobScreen
    from kickside_tui.widgets.chrome import VIEWS
    from kickside_tui.widgets.job_detail import JobDetailPane
    from kickside_tui.widgets.view_table import RowFilter, ViewTable

    labels = {name: f"`{key}` {label}" for name, key, label in VIEWS}
    places: list[tuple[str, type]] = [("Anywhere", KicksideApp)]
    places += [(f"View {labels[name]}", screen) for name, screen in SCREENS.items()]
    places += [
        ("A job opened with `enter`", JobScreen),
        ("A job's detail pane", JobDetailPane),
        ("Every table", ViewTable),
        ("A table's row filter", RowFilter),
        ("A confirmation", ConfirmScreen),
    ]
    out = ["| where | key | does |", "| --- | --- | --- |"]
    for where, cls in places:
        for binding in _bindings(cls):
            if binding.action.startswith("view("):
                continue  # the view keys are listed below
            out.append(f"| {where} | {_keys(binding)} | {binding.description or binding.action} |")
    out.append("")
    out += ["| view key | view |", "| --- | --- |"]
    out += [f"| `{key}` | {label} (`:{name}`) |" for name, key, label in VIEWS]
    return "\n".join(out) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference.cli_reference,
    "exit-codes": cli_reference.exit_codes,
    "environment": cli_reference.environment,
    "pool-config": cli_reference.pool_config,
    "states": states,
    "schema": schema,
    "dashboard-keys": dashboard_keys,
}


def expand(markdown: str, where: str = "a page") -> str:
    """``markdown`` with each ``<!-- generate: NAME -->`` replaced by what NAME writes."""

    def generated(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{where} asks for '{name}', which docs/hooks/generate.py lacks")
        return GENERATORS[name]()

    return MARKER.sub(generated, markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the screenshots and the benchmark plot to the site."""
    for path in sorted((ROOT / "screenshots").glob("*.*")):
        if path.suffix in (".svg", ".png"):
            uri = f"screenshots/{path.name}"
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    plot = ROOT / BENCH_PLOT
    files.append(File.generated(config, "assets/bench.png", abs_src_path=str(plot)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return expand(markdown, page.file.src_uri)


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Docstrings use Sphinx roles (``:class:`Job```): show them as code."""
    return ROLE.sub(r"<code>\1</code>", html).replace("::</p>", ":</p>")
