"""Shared CLI state: the database options from the root callback, and error handling."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

import typer
from rich.markup import escape

from kickside_engine import Database, KicksideError, connect_database
from kickside_tui.cli import output

P = ParamSpec("P")
R = TypeVar("R")

EXIT_CODES_HELP = (
    "Exit codes: 0 success, 1 failure, 2 usage error, 3 not found, "
    "4 conflict (continue or retry), 5 database unavailable, 130 interrupted."
)


@dataclass
class CliState:
    """Options given to the root command, and the database opened from them on first use."""

    database_url: str | None = None
    schema: str | None = None
    _db: Database | None = field(default=None, repr=False)

    def database(self) -> Database:
        if self._db is None:
            self._db = connect_database(self.database_url, schema=self.schema)
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.dispose()
            self._db = None


def state(ctx: typer.Context) -> CliState:
    """The :class:`CliState` of the running command."""
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn Kickside errors into a one-line message on stderr and the documented exit code."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except KicksideError as exc:
            output.error(escape(str(exc)))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            output.error("interrupted")
            raise typer.Exit(130) from None

    return wrapper


def unused(*_: Any) -> None:
    """Mark a value as deliberately unused."""
