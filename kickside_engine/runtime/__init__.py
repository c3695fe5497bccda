"""The supervised worker pool: one supervisor claims jobs and hands each to an executor."""

from kickside_engine.config_sources import (
    CONFIG_ENV,
    OPTIONS,
    ConfigFile,
    Option,
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

__all__ = [
    "CONFIG_ENV",
    "LOG_LEVELS",
    "OPTIONS",
    "AsyncWorkerPool",
    "ConfigFile",
    "Option",
    "PoolConfig",
    "PoolFailedError",
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
