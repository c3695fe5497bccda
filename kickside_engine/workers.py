"""Declaring workers, and the registry an application keeps them in.

A worker has a permanent name (job rows reference it), a default queue, priority, max attempts,
timeout (its max execution), backoff and uniqueness. Declare one with a decorator::

    registry = WorkerRegistry()

    @registry.worker("deliver_email", queue="mailers", max_attempts=10)
    def deliver_email(args: dict, job: Job) -> Outcome | None:
        ...

or a class with a ``perform(self, args, job)`` method (a fresh instance runs each job).
``args_type`` decodes the stored args before ``perform`` sees them: a dataclass (nested
dataclasses, datetimes, UUIDs, decimals, enums... decoded), a pydantic v2 model, a msgspec
Struct, or an :class:`~kickside_engine.typed_args.ArgsAdapter` (see
:mod:`kickside_engine.typed_args`); any other type is refused here, when the worker is declared.
Args that do not decode discard the job with the message, since retrying cannot fix them.
``deliver_email.new(EmailArgs(...))`` stores the instance's JSON encoding.

Args are stored and delivered exactly as given, and redacted wherever they are shown (see
:mod:`kickside_engine.redact`). Names that Kickside does not know to be secret (personal data,
an application's own credentials) are declared per worker or for every worker of a registry::

    registry = WorkerRegistry(sensitive_keys={"ssn"})

    @registry.worker("verify_identity", sensitive_keys={"date_of_birth"})
    def verify_identity(args: dict, job: Job) -> None:
        ...

Enqueueing through the worker (``verify_identity.new(...)``) records the names in the job's
meta, where the CLI and the dashboard (which do not import the application) read them.

An ``async def`` worker (a coroutine function, or a class whose ``perform`` is one) is declared
the same way; :attr:`WorkerSpec.is_async` says so, and the pool runs it on an async executor.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from kickside_engine.backoff import DEFAULT_BACKOFF, Backoff, retry_policy
from kickside_engine.builder import JobBuilder
from kickside_engine.callables import refused_signature
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.hooks import Hooks, Middleware
from kickside_engine.outcomes import Outcome
from kickside_engine.redact import sensitive_key_names
from kickside_engine.text import validate_name
from kickside_engine.typed_args import ArgsAdapter, adapter_for, encode_args, encoded_by
from kickside_engine.uniqueness import Unique

if TYPE_CHECKING:
    from kickside_engine.models import Job

Perform = Callable[[Any, "Job"], Outcome | None]
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TIMEOUT = timedelta(minutes=5)


def _require_perform_signature(name: str | None, target: Any) -> None:
    """Refuse, when it is declared, a worker that cannot be called as ``perform(args, job)``:
    otherwise every attempt of every one of its jobs fails with the same ``TypeError`` until
    the job is discarded."""
    what = f"worker {name!r}" if name else f"worker {getattr(target, '__qualname__', target)!r}"
    if isinstance(target, type):
        raw = inspect.getattr_static(target, "perform", None)
        fn = getattr(target, "perform", None)
        if raw is None or not callable(fn):
            raise InvalidArgumentError(f"{what}: class {target.__qualname__} has no perform method")
        # A plain method is read off the class unbound: it takes the instance first.
        receivers = 0 if isinstance(raw, (staticmethod, classmethod)) else 1
        shown = f"{target.__qualname__}.perform"
    else:
        fn, receivers, shown = target, 0, getattr(target, "__qualname__", repr(target))
    signature = refused_signature(fn, receivers + 2)
    if signature is None:
        return
    expected = "perform(self, args, job)" if receivers else "perform(args, job)"
    bare = signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=signature.empty,
    )
    raise InvalidArgumentError(
        f"{what}: {shown}{bare} cannot be called as {expected}: a worker takes the job's "
        "args and the job"
    )


def _class_perform(cls: Any) -> Perform:
    """``perform`` of a fresh ``cls`` per job; a coroutine function when ``cls.perform`` is."""
    if inspect.iscoroutinefunction(cls.perform):

        async def perform_async(args: Any, job: Job) -> Outcome | None:
            return await cls().perform(args, job)  # type: ignore[no-any-return]

        return cast(Perform, perform_async)
    return lambda args, job: cls().perform(args, job)


@dataclass(frozen=True)
class CapacityDeclaration:
    """A Settings-backed capacity shared by the workers that declare the same group.

    The limits are read from ``kickside_setting`` rows ``(settings_namespace, global_limit_key)``
    and ``(settings_namespace, concurrency_key_limit_key)`` at every claim. Rate limits
    (``"600/min"``, ``"10/s"``, ``"3600/h"``: job starts per window) are optional: the rows
    ``(settings_namespace, rate_limit_key)`` for the group and ``rate_limit_per_key_key`` for
    each concurrency key, when present, are read at every claim too (an invalid one admits
    nothing, like an invalid concurrency limit).
    """

    group: str
    settings_namespace: str
    global_limit_key: str = "global_limit"
    concurrency_key_limit_key: str = "concurrency_key_limit"
    rate_limit_key: str = "rate_limit"
    rate_limit_per_key_key: str = "rate_limit_per_key"

    def as_meta(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class WorkerSpec:
    """A declared worker: its permanent name, its defaults, and the function that runs it."""

    name: str
    perform: Perform
    queue: str = "default"
    priority: int = 0
    max_attempts: int = 20
    timeout: timedelta = DEFAULT_TIMEOUT
    backoff: Backoff = DEFAULT_BACKOFF
    slot_backoff: Backoff | None = None
    unique: Unique | None = None
    #: What ``perform`` takes: None for the stored dict, else a type or an adapter (see
    #: :mod:`kickside_engine.typed_args`), checked when the spec is made.
    args_type: Any = None
    tags: tuple[str, ...] = ()
    capacity: CapacityDeclaration | None = None
    #: Key names to redact wherever this worker's args are shown, beyond the built-in ones.
    sensitive_keys: frozenset[str] = frozenset()
    args_adapter: ArgsAdapter | None = field(default=None, init=False, repr=False, compare=False)
    #: The middleware and hooks of the registry it is registered in (None: not registered).
    hooks: Hooks | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validate_name(self.name, "worker name")
        if self.args_type is not None:
            object.__setattr__(self, "args_adapter", adapter_for(self.args_type))
        object.__setattr__(self, "sensitive_keys", sensitive_key_names(self.sensitive_keys))
        validate_name(self.queue, "queue", max_length=128)
        if not 0 <= self.priority <= 9:
            raise InvalidArgumentError(f"priority must be 0..9, got {self.priority}")
        if self.max_attempts < 1:
            raise InvalidArgumentError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.timeout.total_seconds() <= 0:
            raise InvalidArgumentError(f"timeout must be positive, got {self.timeout}")

    @functools.cached_property
    def is_async(self) -> bool:
        """Whether ``perform`` is an ``async def`` (it then runs on an async executor).

        Asked at every execution: worked out once (``perform`` never changes)."""
        return inspect.iscoroutinefunction(self.perform)

    def new(self, args: Any = None) -> JobBuilder:
        """A job builder for this worker, carrying its defaults."""
        return JobBuilder.for_worker(self, args)

    def decode_args(self, args: dict[str, Any]) -> Any:
        """The args as ``perform`` expects them; raises when they do not decode."""
        if self.args_adapter is None:
            return args
        return self.args_adapter.decode(args)

    def encode_args(self, args: Any) -> dict[str, Any]:
        """``args`` as given to enqueue, as the JSON object to store: a dict as it is, an
        instance of ``args_type`` (or what its adapter takes) encoded."""
        if args is None or isinstance(args, Mapping) or self.args_adapter is None:
            return encode_args(args)
        if isinstance(self.args_type, type) and not isinstance(args, self.args_type):
            raise InvalidArgumentError(
                f"worker {self.name!r} takes args of type {self.args_type.__qualname__} "
                f"(or a dict), got {type(args).__name__}"
            )
        return encoded_by(self.args_adapter, args)

    def backoff_for(self, is_slot: bool) -> Backoff:
        """The retry policy: ``slot_backoff`` for slot jobs when set, else ``backoff``."""
        return retry_policy(self.backoff, self.slot_backoff, is_slot)


class WorkerRegistry:
    """The workers one application can run, by permanent name.

    ``sensitive_keys`` are key names redacted wherever the args of any of its workers are
    shown (the application's global declaration); each worker adds its own.
    """

    def __init__(self, *, sensitive_keys: Iterable[str] = ()) -> None:
        self._workers: dict[str, WorkerSpec] = {}
        self.sensitive_keys = sensitive_key_names(sensitive_keys)
        #: Its middleware and lifecycle hooks (see :mod:`kickside_engine.hooks`).
        self.hooks = Hooks()

    def register(self, spec: WorkerSpec) -> WorkerSpec:
        """Add a worker; a second worker with the same name is an error, and so is one whose
        ``perform`` cannot be called as ``perform(args, job)``.

        The registry's ``sensitive_keys`` are added to the worker's (the spec registered is
        then a copy carrying both).
        """
        _require_perform_signature(spec.name, spec.perform)
        if not self.sensitive_keys <= spec.sensitive_keys:
            keys = spec.sensitive_keys | self.sensitive_keys
            spec = dataclasses.replace(spec, sensitive_keys=keys)
        existing = self._workers.get(spec.name)
        if existing is not None and existing is not spec and existing != spec:
            raise InvalidArgumentError(f"worker {spec.name!r} is already registered")
        if spec.hooks is not self.hooks:
            if spec.hooks is not None:  # registered in another registry too: a copy for this one
                spec = dataclasses.replace(spec)
            object.__setattr__(spec, "hooks", self.hooks)
        self._workers[spec.name] = spec
        return spec

    def middleware(self, fn: Middleware) -> Middleware:
        """Wrap every execution of this registry's workers in ``fn(call_next, args, job)``.

        Usable as a decorator. The first registered is outermost; a plain ``def`` wraps sync
        workers, an ``async def`` async ones (see :mod:`kickside_engine.hooks`).
        """
        self.hooks.add_middleware(fn)
        return fn

    def on_enqueue(self, fn: F) -> F:
        """Call ``fn(Enqueued)`` after each insert of a job built from one of its workers."""
        self.hooks.add_hook("on_enqueue", fn)
        return fn

    def enqueue_meta(self, fn: F) -> F:
        """Add the entries ``fn()`` returns to the meta of each job built from its workers,
        when it is inserted (in the enqueuing thread or task, before the row is built).

        For context that should travel with the job: a trace context, a tenant. A key the
        builder sets (``.meta({...})``) keeps its value; a provider that raises is logged and
        the job is enqueued without its entries.
        """
        self.hooks.add_enqueue_meta(fn)
        return fn

    def on_start(self, fn: F) -> F:
        """Call ``fn(Job)`` in the pool when it hands a job to an executor."""
        self.hooks.add_hook("on_start", fn)
        return fn

    def on_stop(self, fn: F) -> F:
        """Call ``fn(Stopped)`` in the pool when an attempt's outcome comes back."""
        self.hooks.add_hook("on_stop", fn)
        return fn

    def on_discard(self, fn: F) -> F:
        """Call ``fn(Discarded)`` in the pool when an outcome or the Lifeline discards a job."""
        self.hooks.add_hook("on_discard", fn)
        return fn

    def on_rescue(self, fn: F) -> F:
        """Call ``fn(Rescued)`` in the pool when its Lifeline rescues an expired lease."""
        self.hooks.add_hook("on_rescue", fn)
        return fn

    @overload
    def worker(self, target: F, /) -> F: ...

    @overload
    def worker(self, name: str | None = None, /, **options: Any) -> Callable[[F], F]: ...

    def worker(self, name: Any = None, /, **options: Any) -> Any:
        """Decorate a function ``perform(args, job)`` or a class with a ``perform`` method.

        The worker's name defaults to the function's or class's qualified name; give one
        explicitly, because names are permanent.
        """
        if callable(name):
            return self._declare(name, None, {})

        def decorate(target: F) -> F:
            return self._declare(target, name, options)

        return decorate

    def _declare(self, target: F, name: str | None, options: Mapping[str, Any]) -> F:
        _require_perform_signature(name, target)
        if isinstance(target, type):
            cls = target
            perform: Perform = _class_perform(cls)
            defaults = {
                f.name: getattr(cls, f.name)
                for f in dataclasses.fields(WorkerSpec)
                if f.init and f.name not in ("name", "perform") and hasattr(cls, f.name)
            }
            name = name or getattr(cls, "name", None) or f"{cls.__module__}.{cls.__qualname__}"
        else:
            perform = cast(Perform, target)
            defaults = {}
            name = name or f"{target.__module__}.{target.__qualname__}"
        spec = self.register(WorkerSpec(name=name, perform=perform, **{**defaults, **options}))
        target.kickside_worker = spec  # type: ignore[attr-defined]
        if not isinstance(target, type):
            target.new = spec.new  # type: ignore[attr-defined]  # deliver_receipt.new({...})
        return target

    def get(self, name: str) -> WorkerSpec | None:
        """The worker registered under ``name``, or None."""
        return self._workers.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._workers

    def __iter__(self) -> Iterator[WorkerSpec]:
        return iter(list(self._workers.values()))

    def __len__(self) -> int:
        return len(self._workers)

    def names(self) -> list[str]:
        return sorted(self._workers)


def spec_of(target: Any) -> WorkerSpec:
    """The :class:`WorkerSpec` of a decorated worker function or class (or a spec itself)."""
    if isinstance(target, WorkerSpec):
        return target
    spec = getattr(target, "kickside_worker", None)
    if not isinstance(spec, WorkerSpec):
        raise InvalidArgumentError(f"{target!r} is not a registered Kickside worker")
    return spec
