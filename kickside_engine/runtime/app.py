"""Loading an application's workers by import path, and naming the code version."""

from __future__ import annotations

import hashlib
import importlib
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

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


def app_hooks(registry: WorkerRegistry | None, app: str | None) -> Hooks:
    """The hooks the supervisor calls: ``registry``'s, else those of the app's registry (a
    copy: a pool adds its own, such as its metrics, with ``pool.hooks.add_hook``).

    A process pool imports the app here once, at start (its executors import it again, and
    again at each upgrade; the supervisor keeps the hooks it started with). An app that does
    not load gives no hooks: its executors then report why, and the pool stops.
    """
    if registry is not None:
        return registry.hooks.lifecycle_copy()
    try:
        return load_registry(app or "").hooks.lifecycle_copy()
    except (Exception, SystemExit):  # an app that exits on import is not loaded either
        return Hooks()


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

    def backoff_for(self, is_slot: bool) -> Backoff:
        """The retry policy for a slot or a one-shot job of this worker."""
        return retry_policy(self.backoff, self.slot_backoff, is_slot)


def worker_infos(registry: WorkerRegistry) -> dict[str, WorkerInfo]:
    """The timeout and retry policy of every registered worker."""
    return {
        spec.name: WorkerInfo(spec.timeout, spec.backoff, spec.slot_backoff, spec.is_async)
        for spec in registry
    }
