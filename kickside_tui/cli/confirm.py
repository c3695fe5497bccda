"""Confirmation for actions that destroy or stop work: ask on a terminal, refuse without one.

The question goes to stderr, so stdout stays one JSON document under ``--json``. Ctrl-C at the
question exits 130 like anywhere else (not 1, "Aborted."); an answer other than yes exits 1.
"""

from __future__ import annotations

import sys

from kickside_engine import KicksideError
from kickside_tui.cli import output


class ConfirmationRequiredError(KicksideError):
    """An action that needs confirmation was run without a terminal and without ``--yes``."""

    exit_code = 2
    code = "confirmation_required"


class AbortedError(KicksideError):
    """The operator did not confirm the action."""

    exit_code = 1
    code = "aborted"


def interactive() -> bool:
    """Whether a person can answer on stdin (a seam for tests)."""
    return sys.stdin.isatty()


def confirm_or_refuse(question: str) -> None:
    """Ask ``question`` (yes/no) on a terminal; without one refuse (exit 2), suggesting
    ``--yes``."""
    if not interactive():
        raise ConfirmationRequiredError(
            f"refusing without a terminal: {question.splitlines()[0]} Pass --yes to confirm"
        )
    answer = output.ask(f"{question} [y/N]:")
    if answer.lower() not in ("y", "yes"):
        raise AbortedError("aborted")


def confirm_count(question: str, count: int) -> None:
    """Ask for ``count`` to be typed (large or unfiltered bulk actions); refuse without a
    terminal."""
    if not interactive():
        raise ConfirmationRequiredError(
            f"refusing without a terminal: {question} Pass --yes to confirm"
        )
    typed = output.ask(f"{question} Type the number of jobs ({count}) to go ahead:")
    if typed != str(count):
        raise AbortedError(f"aborted: {typed or 'nothing'} is not {count}")


def unless_yes(yes: bool, question: str) -> None:
    """Go ahead when ``--yes`` was given, else :func:`confirm_or_refuse`."""
    if not yes:
        confirm_or_refuse(question)
