"""Dataclass (and attrs class) args, decoded and encoded by one cattrs converter.

The JSON forms: ``datetime``, ``date`` and ``time`` as ISO 8601 (an offset is kept, a naive
value stays naive), ``UUID`` as its string, ``Decimal`` as a string (exact; an integer or a
number's JSON text decodes too), an enum by its value, a set as a sorted list (equal sets store
equal JSON, which uniqueness by args relies on), a tuple as a list, a nested class as an object.

Decoding is as strict as the JSON is exact: a string is not an integer, 1.5 is not an int,
``true`` is not 1, a field missing without a default and a field the class does not have are
errors. The message names every bad field by its path (``$.lines[0].qty: required field
missing``). cattrs is imported when the first such type is declared or encoded, not before.
"""

from __future__ import annotations

import json
import threading
from collections import abc, deque
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin
from uuid import UUID

from kickside_engine.errors import ArgsDecodeError, InvalidArgumentError

if TYPE_CHECKING:
    from cattrs import Converter


class DataclassArgs:
    """The :class:`~kickside_engine.typed_args.ArgsAdapter` of one dataclass or attrs class."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def check(self) -> None:
        """Refuse a class whose fields cannot be decoded from JSON, when it is declared."""
        from cattrs.errors import StructureHandlerNotFoundError

        try:
            converter().get_structure_hook(self.cls)
        except NameError as exc:
            raise InvalidArgumentError(
                f"args_type {_name(self.cls)}: its annotations do not resolve ({exc})"
            ) from None
        except StructureHandlerNotFoundError as exc:
            what = str(exc) if _is_mapping(exc.type_) else repr(exc.type_)
            raise InvalidArgumentError(
                f"args_type {_name(self.cls)} has a field JSON args cannot hold: {what}"
            ) from None

    def decode(self, data: dict[str, Any]) -> Any:
        try:
            return converter().structure(data, self.cls)
        except Exception as exc:
            raise ArgsDecodeError(f"{self.cls.__name__}: {'; '.join(_problems(exc))}") from None

    def encode(self, value: Any) -> dict[str, Any]:
        encoded: dict[str, Any] = converter().unstructure(value)
        return encoded

    def __repr__(self) -> str:
        return f"DataclassArgs({self.cls.__qualname__})"


_converter: Converter | None = None
_lock = threading.Lock()


def converter() -> Converter:
    """The one converter (built on first use, when cattrs is imported)."""
    global _converter
    with _lock:
        if _converter is None:
            _converter = _build()
        return _converter


class _Refused(ValueError):
    """A value of the wrong JSON kind for its field; the message is shown as it is."""


def _build() -> Converter:
    from cattrs.preconf.json import make_converter

    conv = make_converter(forbid_extra_keys=True)
    # Strict primitives. The hook gets the field's own type, so a subclass (an IntEnum, a str
    # enum) is still made by its constructor, which refuses a value that is not a member.
    conv.register_structure_hook(bool, _exact(bool, "a boolean"))
    conv.register_structure_hook(int, _exact(int, "an integer"))
    conv.register_structure_hook(str, _exact(str, "a string"))
    conv.register_structure_hook(float, _number)
    for kind, parse in ((datetime, datetime), (date, date), (time, time)):
        conv.register_structure_hook(kind, _iso(parse))
        conv.register_unstructure_hook(kind, kind.isoformat)
    conv.register_structure_hook(UUID, _uuid)
    conv.register_unstructure_hook(UUID, str)
    conv.register_structure_hook(Decimal, _decimal)
    conv.register_unstructure_hook(Decimal, str)
    conv.register_unstructure_hook_factory(_is_set, lambda _: _sorted_list(conv))
    conv.register_unstructure_hook_func(_is_enum, _enum_value)
    conv.register_structure_hook_factory(_is_array, lambda cls: _array(cls, conv))
    conv.register_structure_hook_factory(_has_keys_json_cannot_hold, _refuse_keys)
    return conv


def _exact(kind: type, what: str) -> Callable[[Any, type], Any]:
    def structure(value: Any, cls: type) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _Refused(f"expected {what}, got {_shown(value)}")
        return value if cls is kind else cls(value)

    return structure


def _number(value: Any, cls: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Refused(f"expected a number, got {_shown(value)}")
    return cls(value)


def _iso(kind: type[date] | type[time]) -> Callable[[Any, type], Any]:
    def structure(value: Any, cls: type) -> Any:
        if isinstance(value, str):
            try:
                return kind.fromisoformat(value)
            except ValueError:
                pass
        raise _Refused(f"expected an ISO 8601 {kind.__name__} string, got {_shown(value)}")

    return structure


def _uuid(value: Any, cls: type) -> UUID:
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise _Refused(f"expected a UUID string, got {_shown(value)}")


def _decimal(value: Any, cls: type) -> Decimal:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            # A float is taken by its shortest text, which is what the JSON held.
            return Decimal(repr(value) if isinstance(value, float) else value)
        except InvalidOperation:
            pass
    raise _Refused(f"expected a decimal number as a string, got {_shown(value)}")


def _is_set(cls: Any) -> bool:
    origin = get_origin(cls) or cls
    return isinstance(origin, type) and issubclass(origin, AbstractSet)


def _sorted_list(conv: Converter) -> Callable[[Any], list[Any]]:
    def unstructure(value: Any) -> list[Any]:
        items = [conv.unstructure(item) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=str))

    return unstructure


def _is_enum(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, Enum)


def _enum_value(member: Enum) -> Any:
    return member.value


#: What each kind of array a field may be is built from, given the list of its items.
_ARRAYS: dict[type, Callable[[list[Any]], Any]] = {
    list: list,
    tuple: tuple,
    set: set,
    frozenset: frozenset,
    deque: deque,
    abc.Sequence: tuple,
    abc.MutableSequence: list,
    abc.Set: frozenset,
    abc.MutableSet: set,
}


def _is_array(cls: Any) -> bool:
    return (get_origin(cls) or cls) in _ARRAYS


def _array(cls: Any, conv: Converter) -> Callable[[Any, type], Any]:
    """A strict hook for an array field: only a JSON array (a list) is one, never a string;
    each item decoded by its own type, each bad one named by its index."""
    from cattrs.errors import IterableValidationError, IterableValidationNote

    make = _ARRAYS[get_origin(cls) or cls]
    args = get_args(cls)
    fixed = make is tuple and bool(args) and args[-1] is not Ellipsis and args != ((),)
    types = list(args) if fixed else [args[0] if args else Any]
    hooks = [conv.get_structure_hook(t) for t in types]

    def structure(value: Any, _: type) -> Any:
        if not isinstance(value, list):
            raise _Refused(f"expected an array, got {_shown(value)}")
        if fixed and len(value) != len(types):
            raise _Refused(f"expected an array of {len(types)} items, got {len(value)}")
        items, errors = [], []
        for index, item in enumerate(value):
            at = index if fixed else 0
            try:
                items.append(hooks[at](item, types[at]))
            except Exception as exc:
                note = IterableValidationNote(f"{cls} @ index {index}", index, types[at])
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {cls!r}", errors, cls)
        return make(items)

    return structure


def _is_mapping(cls: Any) -> bool:
    origin = get_origin(cls) or cls
    return isinstance(origin, type) and issubclass(origin, Mapping)


def _has_keys_json_cannot_hold(cls: Any) -> bool:
    if not _is_mapping(cls):
        return False
    key = (get_args(cls) or (str,))[0]
    return not (key is Any or (isinstance(key, type) and issubclass(key, str)))


def _refuse_keys(cls: Any) -> Callable[[Any, type], Any]:
    from cattrs.errors import StructureHandlerNotFoundError

    raise StructureHandlerNotFoundError(
        f"{cls}: JSON object keys are strings (use str keys, or a str enum)", cls
    )


def _problems(exc: BaseException) -> list[str]:
    """Every problem in ``exc`` as ``path: message``."""
    from cattrs import transform_error

    lines = transform_error(exc, format_exception=_described)
    return [f"{path}: {message}" for message, _, path in (line.rpartition(" @ ") for line in lines)]


def _described(exc: BaseException, cls: type | None) -> str:
    from cattrs.errors import ForbiddenExtraKeysError
    from cattrs.v import format_exception

    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ForbiddenExtraKeysError):
        return f"unknown field(s): {', '.join(sorted(exc.extra_fields))}"
    if get_origin(cls) is Literal:
        return f"expected one of {', '.join(map(repr, get_args(cls)))}"
    if isinstance(exc, AttributeError):  # a nested object or a dict given something else
        return "expected an object"
    if isinstance(exc, _Refused) or (
        isinstance(exc, ValueError | TypeError) and isinstance(cls, type) and issubclass(cls, Enum)
    ):
        return str(exc)
    described = format_exception(exc, cls)
    if described.startswith("unknown error (") and str(exc):
        return str(exc)
    return described


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
