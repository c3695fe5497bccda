"""Redacting structured values: job args, meta and audit details, walked without recursion.

A dict entry under a sensitive key loses its value; every other string goes through
:func:`~kickside_engine.redact.free_text.redact_text`. :func:`redact_args` and
:func:`redact_meta` apply the names a job's meta declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from kickside_engine.redact.declared import REDACTED_ARGS_META, declared_sensitive_keys
from kickside_engine.redact.free_text import redact_text_with
from kickside_engine.redact.keys import KeyRules, rules_for
from kickside_engine.redact.patterns import REDACTED


def _is_container(value: object) -> TypeGuard[dict[Any, Any] | list[Any] | tuple[Any, ...]]:
    return isinstance(value, dict | list | tuple)


class _Frame:
    """One container being rebuilt by :func:`redact_value`'s explicit stack."""

    __slots__ = ("children", "index", "keys", "results", "source")

    def __init__(self, source: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> None:
        self.source = source
        self.keys: list[Any] | None
        self.children: list[Any]
        if isinstance(source, dict):
            self.keys = list(source.keys())
            self.children = list(source.values())
        else:
            self.keys = None
            self.children = list(source)
        self.index = 0
        self.results: list[object] = []

    def build(self, rules: KeyRules) -> object:
        if self.keys is not None:
            return {
                (redact_text_with(key, rules) if isinstance(key, str) else key): value
                for key, value in zip(self.keys, self.results, strict=True)
            }
        if isinstance(self.source, tuple):
            return tuple(self.results)
        return self.results


def redact_value(value: object, sensitive_keys: Iterable[str] = ()) -> object:
    """Return a redacted copy of a JSON-like value (dicts, lists, tuples, scalars).

    A dict entry whose key is sensitive (:func:`is_sensitive_key`, with the names in
    ``sensitive_keys``) has its value replaced by :data:`REDACTED`, whatever its type, except
    that ``None`` stays ``None``. Every other string, including dict keys, goes through
    :func:`redact_text`. Dicts, lists and tuples are rebuilt as plain ``dict``, ``list`` and
    ``tuple``; the input is never mutated. Numbers, booleans, ``None`` and objects that are not
    JSON-like are returned unchanged.

    Nesting of any depth is handled with an explicit stack (no ``RecursionError``). A container
    that contains itself is replaced by :data:`REDACTED` where it recurs (enqueue refuses such
    args; this is for values shown from elsewhere); a container shared between several places
    is redacted once and the copy shared the same way.
    """
    rules = rules_for(sensitive_keys)
    if not _is_container(value):
        return redact_text_with(value, rules) if isinstance(value, str) else value
    done: dict[int, object] = {}
    active: set[int] = {id(value)}
    stack = [_Frame(value)]
    while True:
        frame = stack[-1]
        if frame.index == len(frame.children):
            stack.pop()
            active.discard(id(frame.source))
            built = frame.build(rules)
            done[id(frame.source)] = built
            if not stack:
                return built
            stack[-1].results.append(built)
            continue
        index = frame.index
        frame.index += 1
        child = frame.children[index]
        if frame.keys is not None:
            key = frame.keys[index]
            if isinstance(key, str) and rules.sensitive(key, in_text=False):
                frame.results.append(None if child is None else REDACTED)
                continue
        if not _is_container(child):
            frame.results.append(
                redact_text_with(child, rules) if isinstance(child, str) else child
            )
            continue
        child_id = id(child)
        if child_id in done:
            frame.results.append(done[child_id])
        elif child_id in active:
            frame.results.append(REDACTED)
        else:
            active.add(child_id)
            stack.append(_Frame(child))


def redact_args(args: object, meta: Mapping[str, Any] | None = None) -> object:
    """A job's args as shown: :func:`redact_value` with the names its meta declares."""
    return redact_value(args, declared_sensitive_keys(meta))


def redact_meta(meta: Mapping[str, Any]) -> object:
    """A job's meta as shown: redacted with the names it declares, without the search copy of
    the args (:data:`REDACTED_ARGS_META`, which repeats them)."""
    shown = {k: v for k, v in meta.items() if k != REDACTED_ARGS_META}
    return redact_value(shown, declared_sensitive_keys(meta))
