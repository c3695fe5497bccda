"""Console-script entry points that name a missing extra instead of printing a traceback.

``pip install kickside`` installs the engine alone (SQLAlchemy, Alembic, cronsim); the CLI needs
the ``cli`` extra (Typer, Rich) and the dashboard the ``tui`` extra (Textual too). The scripts
are installed either way, so each checks its imports first and, when one is missing, says in
one line which extra installs it (exit 2, a configuration error).
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


def kickside() -> None:
    """The ``kickside`` command (the CLI)."""
    require(CLI_MODULES, extra="cli", command="kickside")
    from kickside_tui.cli.main import main

    main()


def kickside_tui() -> None:
    """The ``kickside-tui`` command (the dashboard)."""
    require(TUI_MODULES, extra="tui", command="kickside-tui")
    from kickside_tui.app import main

    main()
