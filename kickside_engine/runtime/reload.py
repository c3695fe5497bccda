"""Asking running pools to upgrade in place."""

from __future__ import annotations

import contextlib
import os
import signal
import socket

from kickside_engine.store.database import Database
from kickside_engine.store.nodes import local_node_pids
from kickside_engine.store.notify import notify_in_transaction


def signal_reload(db: Database) -> int:
    """SIGHUP every pool registered on this host; on PostgreSQL also NOTIFY every pool.

    Returns how many local pools were signalled (remote pools hear the notification).
    """
    count = 0
    for _name, pid in local_node_pids(db, socket.gethostname()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGHUP)
            count += 1
    if db.is_postgresql:
        with db.begin() as conn:
            notify_in_transaction(db, conn, "reload")
    return count
