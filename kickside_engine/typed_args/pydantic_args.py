"""Pydantic v2 model args: ``model_validate`` decodes, ``model_dump(mode="json")`` encodes.

Imported only for a type that derives from pydantic's ``BaseModel``, so pydantic is already
loaded by then; the model's own configuration (extra fields, strictness) applies.
"""

from __future__ import annotations

from typing import Any

from kickside_engine.errors import ArgsDecodeError, InvalidArgumentError


class PydanticArgs:
    """The :class:`~kickside_engine.typed_args.ArgsAdapter` of one pydantic v2 model."""

    def __init__(self, model: type) -> None:
        if not hasattr(model, "model_validate"):
            raise InvalidArgumentError(
                f"args_type {model.__qualname__} is a pydantic v1 model: use a pydantic v2 "
                "BaseModel"
            )
        self.model: Any = model

    def decode(self, data: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        try:
            return self.model.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{_path(error['loc'])}: {error['msg']}"
                for error in exc.errors(include_url=False, include_input=False)
            )
            raise ArgsDecodeError(f"{self.model.__name__}: {problems}") from None

    def encode(self, value: Any) -> dict[str, Any]:
        encoded: dict[str, Any] = value.model_dump(mode="json")
        return encoded

    def __repr__(self) -> str:
        return f"PydanticArgs({self.model.__qualname__})"


def _path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a JSON path: ``("lines", 0, "qty")`` is
    ``$.lines[0].qty``."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
