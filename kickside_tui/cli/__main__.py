"""`python -m kickside_tui.cli` runs the `kickside` command."""

from kickside_tui.cli.main import main

main()
