"""Kickside's Alembic migrations: ``env.py`` and the numbered revisions in ``versions/``.

A package (shipped in the wheel with every revision) so that Alembic finds it as
``kickside_engine:migrations`` (the repository's ``alembic.ini``) wherever Kickside is
installed. Nothing here is meant to be imported; :mod:`kickside_engine.migrate` runs it.
"""
