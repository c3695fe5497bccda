"""The ``:`` prompt, as in k9s: type a view's name (or the start of it) to go there.

``:leases``, ``:le``, ``:doctor`` (the Metrics & health view), ``:cron`` (Queues/nodes/cron);
``:job ID`` (or just an id) opens that job. Tab completes, escape closes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Static

from kickside_tui.widgets.chrome import VIEWS

#: Every name the prompt knows, and the view it names; each view's mode name is one of them.
NAMES: dict[str, str] = {
    **{name: name for name, _, _ in VIEWS},
    "health": "metrics",
    "doctor": "metrics",
    "audit": "metrics",
    "queues": "ops",
    "nodes": "ops",
    "cron": "ops",
    "help": "help",
}


@dataclass(frozen=True)
class Jump:
    """Where the prompt sends the operator: a view (its mode name, or ``help``) or a job."""

    view: str | None = None
    job_id: uuid.UUID | None = None


def resolve(text: str) -> Jump | str:
    """The jump ``text`` asks for, or why there is none (a message)."""
    words = text.strip().lstrip(":").split()
    if not words:
        return "type a view's name: " + ", ".join(NAMES)
    first = words[0].lower()
    if (first == "job" and len(words) == 2) or (len(words) == 1 and _job_id(first)):
        job_id = _job_id(words[-1])
        return Jump(job_id=job_id) if job_id else f"not a job id: {words[-1]}"
    if len(words) > 1:
        return f"one name, please: {text.strip()!r}"
    if first in NAMES:
        return Jump(view=NAMES[first])
    matches = sorted({NAMES[name] for name in NAMES if name.startswith(first)})
    if len(matches) == 1:
        return Jump(view=matches[0])
    if matches:
        names = ", ".join(name for name in NAMES if name.startswith(first))
        return f"{first!r} could be {names}"
    return f"no view called {first!r}; try " + ", ".join(NAMES)


def _job_id(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


class JumpScreen(ModalScreen[Jump | None]):
    """A one-line prompt at the bottom; answers the :class:`Jump`, or None when closed."""

    DEFAULT_CSS = """
    JumpScreen {
        align: left bottom;
        background: $background 40%;
    }
    JumpScreen > Vertical {
        height: auto;
        width: 1fr;
        background: $surface;
        border-top: solid $primary;
        padding: 0 1;
    }
    JumpScreen #jump-line {
        height: 1;
    }
    JumpScreen #jump-colon {
        width: 1;
        text-style: bold;
    }
    JumpScreen #jump-hint {
        height: auto;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", show=False),
        Binding("tab", "complete", "Complete", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Vertical():
            with Horizontal(id="jump-line"):
                yield Static(":", id="jump-colon")
                yield Input(
                    placeholder="view name (tab completes), or job ID",
                    id="jump-input",
                    compact=True,
                    suggester=SuggestFromList(NAMES, case_sensitive=False),
                )
            yield Static(Text("  ".join(f":{name}" for name in NAMES)), id="jump-hint")

    def on_mount(self) -> None:
        self.query_one("#jump-input", Input).focus()

    def action_complete(self) -> None:
        box = self.query_one("#jump-input", Input)
        typed = box.value.strip().lower()
        names = [name for name in NAMES if name.startswith(typed)] if typed else []
        if names and len({NAMES[n] for n in names}) == 1:
            box.value = names[0]
            box.cursor_position = len(box.value)
        self._hint(names)

    def on_input_changed(self, event: Input.Changed) -> None:
        typed = event.value.strip().lower()
        self._hint([name for name in NAMES if name.startswith(typed)] if typed else list(NAMES))

    def _hint(self, names: list[str]) -> None:
        text = "  ".join(f":{name}" for name in names) if names else "no such view"
        self.query_one("#jump-hint", Static).update(Text(text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        answer = resolve(event.value)
        if isinstance(answer, str):
            self.query_one("#jump-hint", Static).update(Text(answer, style="bold red"))
            return
        self.dismiss(answer)

    def action_close(self) -> None:
        self.dismiss(None)
