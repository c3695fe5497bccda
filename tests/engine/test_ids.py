"""Job ids: UUIDv7, increasing within a process, never shared with a forked child."""

from __future__ import annotations

import os
import pickle
import uuid

from kickside_engine.ids import uuid7


def test_ids_are_version_7_increasing_and_behave_as_uuids() -> None:
    ids = [uuid7() for _ in range(20_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for made in ids[:3]:
        assert made.version == 7 and made.variant == uuid.RFC_4122
        twin = uuid.UUID(str(made))
        assert twin == made and hash(twin) == hash(made)
        assert pickle.loads(pickle.dumps(made)) == made
        assert made.is_safe is uuid.SafeUUID.unknown


def test_a_forked_child_draws_other_random_bits_than_its_parent() -> None:
    uuid7()  # the parent now holds unread random bytes
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        try:
            os.write(write, uuid7().bytes)
        finally:
            os._exit(0)
    os.close(write)
    child = uuid.UUID(bytes=os.read(read, 16))
    os.close(read)
    os.waitpid(pid, 0)
    parent = uuid7()
    random_bits = (1 << 62) - 1
    assert child.int & random_bits != parent.int & random_bits
