"""Testing helpers for applications that embed Kickside, loaded as a pytest plugin."""

from __future__ import annotations
