"""Asking running pools to upgrade in place."""

from __future__ import annotations

import contextlib
import os
import signal
import socket

from kickside_engine.store.database import Database
from kickside_engine.store.nodes import local_node_pids
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.wake_sockets import reloading_pool_pid


def signal_reload(db: Database) -> int:
    """Ask every pool to reload: on a SQLite file a ``reload`` datagram to every pool's wake
    socket, on PostgreSQL a NOTIFY to every pool, and SIGHUP to each pool registered on this
    host that no datagram reached.

    A pool whose socket took the datagram is not signalled as well (it would upgrade twice):
    so a pool on a thread of an application that leaves SIGHUP to its default (which ends the
    process), or one of another user or PID namespace, reloads on SQLite all the same. A pool
    of an older Kickside (its socket named without the pool mark) is signalled as before.

    Returns how many pools were asked: those the datagram reached plus those signalled (remote
    pools on PostgreSQL hear the notification and are not counted).
    """
    reached_pids: set[int] = set()
    count = 0
    remote = local_signal(db).remote if db.is_sqlite else None
    if remote is not None:
        for target in remote.deliver("reload", fresh=True):
            pid = reloading_pool_pid(target)
            if pid is not None:
                reached_pids.add(pid)
                count += 1
    for _name, pid in local_node_pids(db, socket.gethostname()):
        if pid in reached_pids:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGHUP)
            count += 1
    if db.is_postgresql:
        with db.begin() as conn:
            notify_in_transaction(db, conn, "reload")
    return count
