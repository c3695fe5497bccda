"""Kickside's log records kept off the terminal while a full-screen dashboard owns it.

A log line written to the terminal under a Textual app tears its screen, so while the dashboard
runs the ``kickside`` logger neither propagates nor prints. The logger is put back as it was
when the dashboard exits: an application that embeds the dashboard, or a test that runs the
CLI in-process, keeps its own logging configuration afterwards.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

LOGGER = "kickside"


@contextlib.contextmanager
def kickside_logs_off_the_screen() -> Iterator[None]:
    """While the block runs, records of the ``kickside`` loggers go nowhere near the terminal."""
    logger = logging.getLogger(LOGGER)
    handlers, propagate = list(logger.handlers), logger.propagate
    logger.handlers[:] = [logging.NullHandler()]
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate
