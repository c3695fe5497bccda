"""The command palette's entries for the dashboard's own actions (``ctrl+p``).

Every action the view on screen offers by a key (retry, cancel, park, pause a queue, run the
doctor, sort, filter, copy the id, zoom...) is listed under the name its key binding gives it,
with the key beside it, so the palette and the keys never disagree: both come from the same
bindings. Views, refresh and help come from :meth:`KicksideApp.get_system_commands`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

#: Actions of the tables and the detail pane worth listing (their movement keys are not).
WIDGET_ACTIONS = frozenset({"sort_next", "filter", "copy_id"})
#: Actions of the app itself that the system commands do not list already.
APP_ACTIONS = frozenset({"jump"})


class DashboardCommands(Provider):
    """The current view's actions, found from its active key bindings."""

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        screen, app = self.screen, self.app
        seen: set[str] = set()
        for key, active in screen.active_bindings.items():
            binding, node = active.binding, active.node
            if not active.enabled or not binding.description or binding.action in seen:
                continue
            if node is app:
                wanted = binding.action in APP_ACTIONS
            else:
                wanted = isinstance(node, Screen) or binding.action in WIDGET_ACTIONS
            if not wanted:
                continue
            seen.add(binding.action)
            shown_key = app.get_key_display(binding) if binding.key == key else key
            yield (
                binding.description,
                f"key {shown_key}" + (f" · {binding.tooltip}" if binding.tooltip else ""),
                partial(app.run_action, binding.action, node),
            )

    async def discover(self) -> Hits:
        for name, help_text, run in self._commands():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, run in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help_text)
