"""Options and arguments shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout (and nothing else).")
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
JobIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The job's id, or its last 8 to 12 hex digits.")
]
