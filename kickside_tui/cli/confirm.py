"""Confirmation for destructive actions: ask on a terminal, refuse without one."""

from __future__ import annotations

import sys

import typer

from kickside_tui.cli import output


def confirm_or_refuse(question: str) -> None:
    """Ask ``question`` on a terminal; without a terminal refuse (exit 2) and suggest ``--yes``.

    The question goes to stderr, so stdout stays one JSON document under ``--json``.
    """
    if not sys.stdin.isatty():
        output.error("refusing a destructive action without a terminal: pass --yes to confirm")
        raise typer.Exit(2)
    if not typer.confirm(question, default=False, err=True):
        output.error("aborted")
        raise typer.Exit(1)


def unless_yes(yes: bool, question: str) -> None:
    """Go ahead when ``--yes`` was given, else :func:`confirm_or_refuse`."""
    if not yes:
        confirm_or_refuse(question)
