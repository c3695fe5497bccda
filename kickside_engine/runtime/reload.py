"""Asking running pools to upgrade in place."""

from __future__ import annotations

import contextlib
import os
import signal
import socket

from kickside_engine.clock import utcnow
from kickside_engine.store.database import Database
from kickside_engine.store.nodes import NODE_STALE_AFTER, count_live_nodes, local_node_pids
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.wake_sockets import reloading_pool_pid


def signal_reload(db: Database) -> int:
    """Ask every pool to reload: on PostgreSQL a NOTIFY that every pool listens for, on a
    SQLite file a ``reload`` datagram to every pool's wake socket and SIGHUP to each pool
    registered on this host that no datagram reached.

    No pool is both told and signalled (it would upgrade twice), and a pool that can be told is
    never signalled: a pool on a thread of an application that leaves SIGHUP to its default
    (which ends the process), or one of another user or PID namespace, reloads all the same.
    Every PostgreSQL pool has listened for ``reload`` since the first release; a pool whose
    LISTEN connection is down at that moment misses it (ask again once it is back). On SQLite a
    pool of an older Kickside (its socket named without the pool mark) is signalled as before.

    Returns how many pools were asked: on PostgreSQL the live pools (a heartbeat within
    :data:`~kickside_engine.store.nodes.NODE_STALE_AFTER`) on every host, on SQLite those the
    datagram reached plus those signalled.
    """
    if db.is_postgresql:
        with db.begin() as conn:
            notify_in_transaction(db, conn, "reload")
        return count_live_nodes(db, utcnow() - NODE_STALE_AFTER)
    reached_pids: set[int] = set()
    count = 0
    remote = local_signal(db).remote
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
    return count
