"""The supervised worker pool: one supervisor claims jobs and hands each to an executor."""

from typing import TYPE_CHECKING, Any

from kickside_engine.config_sources import (
    CONFIG_ENV,
    OPTIONS,
    ConfigFile,
    Option,
    Resolved,
    ResolvedConfig,
    find_config_file,
    load_config,
    load_pool_config,
    resolve_config,
)
from kickside_engine.errors import PoolFailedError
from kickside_engine.logs import LOG_LEVELS, configure_logging
from kickside_engine.runtime.app import load_registry
from kickside_engine.runtime.async_pool import AsyncWorkerPool
from kickside_engine.runtime.config import (
    PoolConfig,
    parse_duration,
    parse_queue_leases,
    parse_queues,
)
from kickside_engine.runtime.pool import WorkerPool
from kickside_engine.runtime.reload import signal_reload

if TYPE_CHECKING:
    from kickside_engine.runtime.prometheus import PoolMetrics as PoolMetrics


def __getattr__(name: str) -> Any:
    # PoolMetrics needs the optional prometheus_client: imported only when asked for.
    if name == "PoolMetrics":
        from kickside_engine.runtime.prometheus import PoolMetrics as PoolMetrics

        return PoolMetrics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONFIG_ENV",
    "LOG_LEVELS",
    "OPTIONS",
    "AsyncWorkerPool",
    "ConfigFile",
    "Option",
    "PoolConfig",
    "PoolFailedError",
    "Resolved",
    "ResolvedConfig",
    "WorkerPool",
    "configure_logging",
    "find_config_file",
    "load_config",
    "load_pool_config",
    "load_registry",
    "parse_duration",
    "parse_queue_leases",
    "parse_queues",
    "resolve_config",
    "signal_reload",
]
