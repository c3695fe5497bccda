"""The SQLite wake sockets' contract: sending never blocks or fails, dead pools are forgotten."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kickside_engine.store.wake_sockets import (
    WakeSender,
    WakeSocket,
    reloading_pool_pid,
    wake_folder,
)


def _foreign_socket(folder: Path, name: str = "1-deadbeef.sock") -> socket.socket:
    """A socket bound in ``folder`` under another process's name (as another pool binds)."""
    folder.mkdir(exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(folder / name))
    sock.setblocking(False)
    return sock


def test_the_folder_sits_beside_the_database_file() -> None:
    short = Path("/srv/app/data.db")
    assert wake_folder(short) == Path("/srv/app/data.db-kickside-wake")


def test_a_path_too_long_for_a_socket_moves_the_folder_to_a_short_one_every_process_finds(
    tmp_path: Path,
) -> None:
    deep = tmp_path.joinpath(*["folder-with-a-long-name"] * 6) / "app.db"
    folder = wake_folder(deep)
    assert len(os.fsencode(folder / "4194304-0123abcd.sock")) < 104
    code = "import sys; from pathlib import Path; from kickside_engine.store.wake_sockets import "
    code += f"wake_folder; print(wake_folder(Path({str(deep)!r})))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == str(folder)


def test_a_pool_in_another_process_gets_the_payload(tmp_path: Path) -> None:
    folder = wake_folder(tmp_path / "db")
    receiver = _foreign_socket(folder)
    try:
        sender = WakeSender(folder)
        assert sender.send("mailers") == 1
        assert receiver.recv(100) == b"mailers"
    finally:
        sender.close()
        receiver.close()


def test_this_process_sends_nothing_to_its_own_pools(tmp_path: Path) -> None:
    folder = wake_folder(tmp_path / "db")
    own = WakeSocket.open(folder)
    assert own is not None
    try:
        assert WakeSender(folder).send("default") == 0  # found only its own: opened no socket
        assert own.receive() == []
    finally:
        own.close()
    assert not folder.exists(), "the last pool to stop removes the folder"


def test_a_pool_stopping_leaves_the_folder_to_the_pools_still_bound(tmp_path: Path) -> None:
    folder = wake_folder(tmp_path / "db")
    first, second = WakeSocket.open(folder), WakeSocket.open(folder)
    assert first is not None and second is not None
    first.close()
    assert [p.name for p in folder.iterdir()] == [second.path.name]
    second.close()
    assert not folder.exists()


def test_a_dead_pools_socket_is_removed_by_the_next_send(tmp_path: Path) -> None:
    folder = wake_folder(tmp_path / "db")
    dead = _foreign_socket(folder)
    dead.close()  # killed: its file stays, nobody reads it
    sender = WakeSender(folder)
    assert sender.send("default") == 0
    sender.close()
    assert list(folder.iterdir()) == []


def test_a_full_queue_never_blocks_the_sender(tmp_path: Path) -> None:
    folder = wake_folder(tmp_path / "db")
    idle = _foreign_socket(folder)  # never read: its queue fills up
    sender = WakeSender(folder)
    try:
        started = time.monotonic()
        results = [sender.send("default") for _ in range(5000)]
        assert time.monotonic() - started < 5
        assert results[0] == 1 and results[-1] == 0  # the later ones found the queue full
    finally:
        sender.close()
        idle.close()


def test_no_folder_means_no_pool_and_nothing_to_send(tmp_path: Path) -> None:
    assert WakeSender(tmp_path / "missing-kickside-wake").send("default") == 0


def test_a_folder_that_cannot_be_made_leaves_the_pool_to_polling(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = wake_folder(tmp_path / "db")
    blocker.write_text("a file where the folder should be")
    with caplog.at_level(logging.WARNING, logger="kickside.wake_sockets"):
        assert WakeSocket.open(blocker) is None
    (record,) = caplog.records
    assert "polling only" in record.getMessage()


#: Enqueues on a SQLite file while a pool's socket is bound (so the wake signal opens a sending
#: socket), then, when told, disposes of the database; prints what it saw.
_SENDER_SCRIPT = """
import gc, socket, sys
from pathlib import Path
from kickside_engine import Database, JobBuilder, migrate
from kickside_engine.store.notify import local_signal
from kickside_engine.store.wake_sockets import wake_folder

path = Path(sys.argv[1])
db = Database.from_url(f"sqlite:///{path}")
migrate.upgrade(db)
folder = wake_folder(path)
folder.mkdir(exist_ok=True)
pool = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
pool.bind(str(folder / "1-p0000000.sock"))  # another process's pool, as far as the sender knows
JobBuilder("noop", {}).insert(db)
remote = local_signal(db).remote
print("received", pool.recv(100).decode())
print("open before dispose", remote._sock is not None)
if sys.argv[2] == "dispose":
    db.dispose()
    print("open after dispose", remote._sock is not None)
else:  # the connections only: the sender is left to the interpreter's exit
    db.engine.dispose()
pool.close()
del remote, pool
gc.collect()
"""


@pytest.mark.parametrize("how", ["dispose", "exit"])
def test_the_sending_socket_is_closed_by_dispose_and_at_exit(tmp_path: Path, how: str) -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-X", "dev", "-c", _SENDER_SCRIPT,
         str(tmp_path / "app.db"), how],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["received default", "open before dispose True"]
    if how == "dispose":
        assert lines[2:] == ["open after dispose False"]
    assert "ResourceWarning" not in result.stderr and "unclosed" not in result.stderr, result.stderr


def test_reload_capable_pools_are_told_from_subscriptions_and_older_pools(tmp_path: Path) -> None:
    folder = wake_folder(tmp_path / "db")
    pool = WakeSocket.open(folder, "pool")
    subscription = WakeSocket.open(folder, "listen")
    assert pool is not None and subscription is not None
    try:
        assert reloading_pool_pid(pool.path) == os.getpid()
        assert reloading_pool_pid(subscription.path) is None
        assert reloading_pool_pid(folder / "4242-0123abcd.sock") is None  # an older pool
        assert (
            len(os.fsencode(pool.path.name))
            == len("4242-0123abcd.sock") + len(str(os.getpid())) - 4
        )
    finally:
        pool.close()
        subscription.close()
