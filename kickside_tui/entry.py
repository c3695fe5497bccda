"""Console-script entry points that name a missing extra instead of printing a traceback.

The scripts are installed with the engine whichever extras are, so each checks its imports
first and, when one is missing, says in one line which extra installs it (exit 2, a
configuration error).
"""

from __future__ import annotations

from kickside_tui.extras import CLI_MODULES, TUI_MODULES, require


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
