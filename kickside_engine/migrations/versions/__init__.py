"""Kickside's revisions, one file each (Alembic skips this ``__init__``)."""
