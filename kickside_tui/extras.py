"""Which optional extras are installed: the CLI and dashboard check before importing them.

``pip install kickside`` installs the engine alone (SQLAlchemy, Alembic, cronsim, cattrs); the
CLI needs the ``cli`` extra (Typer, Rich) and the dashboard the ``tui`` extra (Textual too).
"""

from __future__ import annotations

import importlib.util
import sys

CLI_MODULES = ("typer", "rich")
TUI_MODULES = (*CLI_MODULES, "textual")


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The top-level modules of ``modules`` that cannot be imported here."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require(modules: tuple[str, ...], *, extra: str, command: str) -> None:
    """Exit 2 with one line naming ``extra`` when any of ``modules`` is not installed."""
    missing = missing_modules(modules)
    if missing:
        print(
            f"{command}: needs {', '.join(missing)}, which the {extra} extra installs: "
            f"pip install 'kickside[{extra}]'",
            file=sys.stderr,
        )
        raise SystemExit(2)
