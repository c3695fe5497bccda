"""msgspec Struct args: ``msgspec.convert`` decodes, ``msgspec.to_builtins`` encodes.

Imported only for a type that derives from ``msgspec.Struct``, so msgspec is already loaded by
then; the Struct's own configuration (unknown fields, renames) applies. Sets and dicts are
encoded in a deterministic order, so that equal values store equal JSON.
"""

from __future__ import annotations

from typing import Any

from kickside_engine.errors import ArgsDecodeError


class MsgspecArgs:
    """The :class:`~kickside_engine.typed_args.ArgsAdapter` of one msgspec Struct."""

    def __init__(self, struct: type) -> None:
        self.struct = struct

    def decode(self, data: dict[str, Any]) -> Any:
        import msgspec

        try:
            return msgspec.convert(data, self.struct)
        except msgspec.ValidationError as exc:
            message, _, path = str(exc).rpartition(" - at `")
            where = f"{path.rstrip('`')}: " if message else ""
            raise ArgsDecodeError(f"{self.struct.__name__}: {where}{message or exc}") from None

    def encode(self, value: Any) -> dict[str, Any]:
        import msgspec

        encoded: dict[str, Any] = msgspec.to_builtins(value, order="deterministic")
        return encoded

    def __repr__(self) -> str:
        return f"MsgspecArgs({self.struct.__qualname__})"
