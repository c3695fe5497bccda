"""The supervised worker pool: one supervisor claims jobs and hands each to an executor."""

from kickside_engine.runtime.config import (
    PoolConfig,
    parse_duration,
    parse_queue_leases,
    parse_queues,
)
from kickside_engine.runtime.pool import PoolFailedError, WorkerPool
from kickside_engine.runtime.reload import signal_reload

__all__ = [
    "PoolConfig",
    "PoolFailedError",
    "WorkerPool",
    "parse_duration",
    "parse_queue_leases",
    "parse_queues",
    "signal_reload",
]
