"""A process that enqueues jobs one commit at a time, as an application's requests do.

``python -m tests.support.enqueuer --database-url URL --count N --log PATH [--start-at T]
[--ms MS]`` inserts ``N`` ``chaos`` jobs (see :mod:`tests.support.chaos_app`) whose bodies sleep
``MS`` to ``MS + 4`` milliseconds, each in its own transaction, starting at wall-clock time
``T``, prints how many it inserted and exits 0. Anything that goes wrong reaches the user as it
would in an application: a traceback and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from kickside_engine import JobBuilder, connect_database


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.enqueuer")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--schema", default=None)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--ms", type=int, default=0)
    args = parser.parse_args(argv)
    db = connect_database(args.database_url, schema=args.schema)
    try:
        time.sleep(max(0.0, args.start_at - time.time()))
        for i in range(args.count):
            JobBuilder("chaos", {"log": args.log, "ms": args.ms + i % 5}).insert(db)
    finally:
        db.dispose()
    print(args.count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
