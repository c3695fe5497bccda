"""Textual's footer, without its slow leak.

Each recompose of Textual's ``Footer`` (on every change of bindings: every view switch, every
focus change) binds a watcher on the footer's ``compact`` for each new key, and the watchers of
the keys it removed stay on the list until ``compact`` changes, which here it never does: about
0.3 MB a view switch, found by the soak (issue 9). After each recompose the stale ones go.
"""

from __future__ import annotations

from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    """The footer every view shows (key bindings), pruning its stale watchers."""

    async def recompose(self) -> None:
        await super().recompose()
        self.prune_watchers()

    def prune_watchers(self) -> int:
        """Drop watchers whose widget has been removed; returns how many went."""
        dropped = 0
        watchers: dict[str, list[tuple[object, object]]] = getattr(self, "__watchers", {})
        for entries in watchers.values():
            kept = [
                (node, callback)
                for node, callback in entries
                if node is self or not (getattr(node, "_closing", False) or _gone(node))
            ]
            dropped += len(entries) - len(kept)
            entries[:] = kept
        return dropped


def _gone(node: object) -> bool:
    return bool(getattr(node, "_closed", False)) or not getattr(node, "is_attached", True)
