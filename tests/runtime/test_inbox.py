"""The supervisor's bulk reader of an executor's pipe: every message waiting in one read, in
order, whatever their size, and the end of the pipe once they are taken."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from kickside_engine.runtime.executors import send
from kickside_engine.runtime.inbox import Inbox


def test_one_read_takes_every_message_waiting_in_order() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)
    for i in range(50):
        send(theirs, ("result", i, b"x" * i))
    inbox = Inbox(ours)
    assert inbox.waiting()
    assert inbox.read() == [("result", i, b"x" * i) for i in range(50)]
    assert not inbox.waiting()


def test_a_message_longer_than_one_read_comes_whole_after_several() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)
    big = ("result", 1, b"y" * 300_000)
    writer = threading.Thread(target=lambda: (send(theirs, big), send(theirs, ("progress", 2))))
    writer.start()
    inbox = Inbox(ours)
    messages: list[object] = []
    while len(messages) < 2:
        messages += inbox.read()
    writer.join()
    assert messages == [big, ("progress", 2)]


def test_the_end_of_the_pipe_comes_after_the_last_message() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)
    send(theirs, ("result", 7, b""))
    theirs.close()
    inbox = Inbox(ours)
    assert inbox.read() == [("result", 7, b"")]
    with pytest.raises(EOFError):
        inbox.read()
