"""Terminating the PostgreSQL connections of chosen processes only (Linux ``/proc``).

Other tests share the PostgreSQL server, and every Kickside connection has the same
``application_name``: terminating by name would cut theirs too. Instead, the client ports of the
given processes' TCP sockets are looked up in ``/proc`` and matched against
``pg_stat_activity.client_port``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import sqlalchemy as sa

from .procfs import process_tree


def _socket_inodes(pids: Iterable[int]) -> set[str]:
    inodes: set[str] = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    return inodes


def client_ports(pids: Iterable[int], server_port: int = 5432) -> set[int]:
    """Local ports of the TCP connections to ``server_port`` held by ``pids``."""
    inodes = _socket_inodes(pids)
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == server_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def terminate_backends(admin_url: str, pids: Iterable[int]) -> int:
    """Terminate every backend serving one of ``pids`` (and their children); how many."""
    engine = sa.create_engine(admin_url)
    try:
        port = engine.url.port or 5432
        ports = client_ports([p for pid in pids for p in process_tree(pid)], port)
        if not ports:
            return 0
        with engine.begin() as conn:
            return len(
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE client_port = ANY(:ports) AND pid <> pg_backend_pid()"
                    ),
                    {"ports": sorted(ports)},
                ).all()
            )
    finally:
        engine.dispose()
