"""Checking, when an application declares a worker or middleware, that Kickside can call it."""

from __future__ import annotations

import inspect
from typing import Any


def refused_signature(fn: Any, positional: int) -> inspect.Signature | None:
    """``fn``'s signature when it cannot be called with ``positional`` positional arguments;
    None when it can, or when Python cannot read its signature (a builtin: taken on trust)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*([None] * positional))
    except TypeError:
        return signature
    return None
