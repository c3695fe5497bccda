"""Loading an application's workers by import path, and naming the code version."""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

from kickside_engine.backoff import Backoff, retry_policy
from kickside_engine.errors import ConfigurationError
from kickside_engine.hooks import Hooks
from kickside_engine.workers import WorkerRegistry


def load_registry(app: str) -> WorkerRegistry:
    """Import ``module`` or ``module:attribute`` and return its :class:`WorkerRegistry`.

    Without an attribute, the module's ``registry`` is used.
    """
    module_name, _, attr = app.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import worker module {module_name!r}: {exc}") from None
    registry = getattr(module, attr or "registry", None)
    if not isinstance(registry, WorkerRegistry):
        raise ConfigurationError(
            f"{module_name}:{attr or 'registry'} is not a kickside WorkerRegistry"
        )
    return registry


class WorkerKinds(NamedTuple):
    """Which kinds of worker an app registers, and the queues only its ``async def`` workers
    declare (a pool sizes no process executors for those)."""

    has_sync: bool
    has_async: bool
    async_only_queues: frozenset[str] = frozenset()


def worker_kinds(declared: Iterable[tuple[str, bool]]) -> WorkerKinds:
    """The kinds of the workers ``declared`` as ``(queue, is_async)`` pairs."""
    sync_queues: set[str] = set()
    async_queues: set[str] = set()
    for queue, is_async in declared:
        (async_queues if is_async else sync_queues).add(queue)
    return WorkerKinds(bool(sync_queues), bool(async_queues), frozenset(async_queues - sync_queues))


class SupervisorApp:
    """The app as a pool's supervisor sees it: its registry, imported once when the pool is
    made (or given), or why it did not load.

    The supervisor reads its hooks and which kinds of worker it has (to size the executors);
    a process pool's executors import the app again, and again at each upgrade (the supervisor
    keeps what it started with). An app that does not load here gives no hooks and no kinds:
    its executors then report why, and the pool stops. A thread pool runs the registry itself
    (:meth:`require`).
    """

    def __init__(self, registry: WorkerRegistry | None, error: BaseException | None = None) -> None:
        self.registry = registry
        #: Why the app did not load (None when it did).
        self.error = error

    @classmethod
    def load(cls, registry: WorkerRegistry | None, app: str | None) -> SupervisorApp:
        """``registry`` when given, else the registry of ``app``, imported here."""
        if registry is not None:
            return cls(registry)
        try:
            return cls(load_registry(app or ""))
        except (Exception, SystemExit) as exc:  # an app that exits on import is not loaded either
            return cls(None, exc)

    def hooks(self) -> Hooks:
        """The hooks the supervisor calls: a copy of the app's (a pool adds its own, such as
        its metrics, with ``pool.hooks.add_hook``); none when the app did not load."""
        return self.registry.hooks.lifecycle_copy() if self.registry is not None else Hooks()

    def worker_kinds(self) -> WorkerKinds | None:
        """Whether the app has sync and ``async def`` workers; None when it did not load."""
        if self.registry is None:
            return None
        return worker_kinds((spec.queue, spec.is_async) for spec in self.registry)

    def require(self) -> WorkerRegistry:
        """The registry; raises what stopped the app loading when it did not."""
        if self.registry is None:
            assert self.error is not None
            raise self.error
        return self.registry


def code_version(app: str | None) -> str:
    """The app module's ``KICKSIDE_CODE_VERSION`` or ``__version__``, else a hash of its source.

    The hash covers the module's file (or every ``.py`` file of its package), so editing the
    worker code yields a new version.
    """
    if not app:
        return "embedded"
    module = sys.modules.get(app.partition(":")[0])
    if module is None:
        return "unknown"
    for name in ("KICKSIDE_CODE_VERSION", "__version__"):
        value = getattr(module, name, None)
        if isinstance(value, str) and value:
            return value[:128]
    path = getattr(module, "__file__", None)
    if not path:
        return "unknown"
    file = Path(path)
    files = sorted(file.parent.rglob("*.py")) if file.name == "__init__.py" else [file]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return "sha-" + digest.hexdigest()[:12]


@dataclass(frozen=True)
class WorkerInfo:
    """What the supervisor needs to know of a worker it never imports."""

    timeout: timedelta
    backoff: Backoff
    slot_backoff: Backoff | None
    #: An ``async def`` worker: its jobs run on async executors only.
    is_async: bool = False
    #: The queue it declares (its jobs' default).
    queue: str = "default"

    def backoff_for(self, is_slot: bool) -> Backoff:
        """The retry policy for a slot or a one-shot job of this worker."""
        return retry_policy(self.backoff, self.slot_backoff, is_slot)


def worker_infos(registry: WorkerRegistry) -> dict[str, WorkerInfo]:
    """The timeout and retry policy of every registered worker."""
    return {
        spec.name: WorkerInfo(
            spec.timeout, spec.backoff, spec.slot_backoff, spec.is_async, spec.queue
        )
        for spec in registry
    }
