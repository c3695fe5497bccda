"""The dashboard's screens: one per view, plus the confirmation, purge and help dialogs."""
