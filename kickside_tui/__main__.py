"""``python -m kickside_tui`` runs the dashboard."""

from kickside_tui.app import main

main()
