"""Typed args: the stored JSON object decoded into what ``perform`` takes, and typed values
encoded into that JSON object at enqueue.

A worker's ``args_type`` is one of:

- a dataclass (or an attrs class): decoded strictly, field by field, nested dataclasses,
  ``datetime``/``date``/``time`` (ISO 8601, offset kept), ``UUID``, ``Decimal`` (a string,
  exact), enums (by value), lists, tuples, sets, dicts, optionals and other unions,
  ``Literal`` and defaults (:mod:`kickside_engine.typed_args.dataclass_args`);
- a pydantic v2 model: ``model_validate`` decodes, ``model_dump(mode="json")`` encodes;
- a msgspec Struct: ``msgspec.convert`` decodes, ``msgspec.to_builtins`` encodes;
- a class whose ``__kickside_args__`` attribute is an :class:`ArgsAdapter` for it;
- an :class:`ArgsAdapter` object (any object with ``decode`` and ``encode``).

Anything else is refused when the worker is declared. pydantic and msgspec are never imported
here: a type is recognised by the module names of its classes, so only an application that uses
them loads them (their adapters import them then, when they are already loaded).

The stored args of a typed value are its JSON encoding; a plain dict is stored as given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from kickside_engine.errors import InvalidArgumentError

#: The class attribute that names a type's adapter (``__kickside_args__ = PointArgs()``).
ADAPTER_ATTRIBUTE = "__kickside_args__"

#: The typed values enqueue encodes, and (with an adapter object) the supported args types.
TYPED_VALUES = (
    f"a dataclass, an attrs class, a pydantic v2 model, a msgspec Struct or a class with "
    f"{ADAPTER_ATTRIBUTE}"
)
SUPPORTED = f"{TYPED_VALUES}, or an ArgsAdapter (an object with decode and encode)"


@runtime_checkable
class ArgsAdapter(Protocol):
    """How args of one type are decoded from, and encoded to, a job's stored JSON object.

    ``decode`` raises when the data does not fit (the job is then discarded with the message:
    retrying cannot fix it; name the field). ``encode`` returns a JSON object (a dict with
    string keys), which enqueue checks as it checks any args.
    """

    def decode(self, data: dict[str, Any]) -> Any:
        """The value ``perform`` takes, from the stored args."""
        ...

    def encode(self, value: Any) -> dict[str, Any]:
        """The JSON object stored for ``value``."""
        ...


def adapter_for(args_type: Any) -> ArgsAdapter:
    """The adapter for a worker's ``args_type``, checked now: an unsupported type, or a
    dataclass whose fields cannot be decoded from JSON, is an :class:`InvalidArgumentError`
    (one line, naming the type)."""
    if isinstance(args_type, type):
        adapter = _type_adapter(args_type)
        if adapter is None:
            raise InvalidArgumentError(
                f"args_type {_name(args_type)} is not supported: use {SUPPORTED}"
            )
        check = getattr(adapter, "check", None)
        if callable(check):
            check()
        return adapter
    if _is_adapter(args_type):
        return args_type  # type: ignore[no-any-return]
    raise InvalidArgumentError(f"args_type {args_type!r} is not supported: use {SUPPORTED}")


def encode_args(value: Any) -> dict[str, Any]:
    """Args as given to enqueue, as the JSON object to store (checked afterwards as any args):
    None is ``{}``, a dict or other mapping is copied as given, a typed value is encoded."""
    if value is None:
        return {}
    if type(value) is dict:
        return dict(value)
    if isinstance(value, Mapping):
        return dict(value)
    adapter = None if isinstance(value, type) else _type_adapter(type(value))
    if adapter is None:
        raise InvalidArgumentError(
            f"args must be a JSON object (a dict) or a typed value ({TYPED_VALUES}), "
            f"got {type(value).__name__}"
        )
    return encoded_by(adapter, value)


def encoded_by(adapter: ArgsAdapter, value: Any) -> dict[str, Any]:
    """``adapter.encode(value)``, refused unless it is a JSON object."""
    try:
        encoded = adapter.encode(value)
    except InvalidArgumentError:
        raise
    except Exception as exc:
        raise InvalidArgumentError(
            f"args of type {type(value).__name__} do not encode to JSON: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(encoded, dict):
        raise InvalidArgumentError(
            f"args of type {type(value).__name__} encode to {type(encoded).__name__}, "
            "not a JSON object"
        )
    return encoded


#: Each type's adapter (or None), made once: a dataclass's decoder is generated then.
_ADAPTERS: dict[type, ArgsAdapter | None] = {}


def _type_adapter(cls: type) -> ArgsAdapter | None:
    """The adapter for instances of ``cls``, or None when ``cls`` is no supported kind."""
    try:
        return _ADAPTERS[cls]
    except KeyError:
        return _ADAPTERS.setdefault(cls, _new_type_adapter(cls))


def _new_type_adapter(cls: type) -> ArgsAdapter | None:
    own = getattr(cls, ADAPTER_ATTRIBUTE, None)
    if own is not None:
        if not _is_adapter(own):
            raise InvalidArgumentError(
                f"{_name(cls)}.{ADAPTER_ATTRIBUTE} must be an ArgsAdapter (an object with "
                f"decode and encode), got {own!r}"
            )
        return own  # type: ignore[no-any-return]
    if _has_base(cls, "pydantic", "BaseModel"):
        from kickside_engine.typed_args.pydantic_args import PydanticArgs

        return PydanticArgs(cls)
    if _has_base(cls, "msgspec", "Struct"):
        from kickside_engine.typed_args.msgspec_args import MsgspecArgs

        return MsgspecArgs(cls)
    if dataclasses.is_dataclass(cls) or hasattr(cls, "__attrs_attrs__"):
        from kickside_engine.typed_args.dataclass_args import DataclassArgs

        return DataclassArgs(cls)
    return None


def _has_base(cls: type, package: str, name: str) -> bool:
    """Whether ``cls`` derives from ``package``'s class ``name``, judged by module names only
    (so that checking never imports ``package``)."""
    return any(
        base.__name__ == name and base.__module__.partition(".")[0] == package
        for base in cls.__mro__
    )


def _is_adapter(value: Any) -> bool:
    return callable(getattr(value, "decode", None)) and callable(getattr(value, "encode", None))


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
