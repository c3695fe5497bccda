"""A worker that cannot be called as ``perform(args, job)`` is refused when it is declared, in
one line naming it, instead of failing every attempt of every job with the same TypeError; any
callable that can be called so is accepted, and runs."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from kickside_engine import Done, InvalidArgumentError, Job, WorkerRegistry, WorkerSpec
from kickside_engine.testing import perform_job


def _one_arg(url: str) -> None: ...


async def _async_one_arg(url: str) -> None: ...


def _three_args(args: Any, job: Job, extra: Any) -> None: ...


def _keyword_only(*, args: Any, job: Job) -> None: ...


class _PerformWithoutJob:
    def perform(self, args: Any) -> None: ...


class _NoPerform:
    def run(self, args: Any, job: Job) -> None: ...


class _PerformNotCallable:
    perform = "not a method"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (_one_arg, "worker 'refused': _one_arg(url) cannot be called as "),
        (_async_one_arg, "_async_one_arg(url) cannot be called as perform(args, job)"),
        (_three_args, "cannot be called as perform(args, job)"),
        (_keyword_only, "cannot be called as perform(args, job)"),
        (
            _PerformWithoutJob,
            "_PerformWithoutJob.perform(self, args) cannot be called as perform(self, args, job)",
        ),
        (_NoPerform, "worker 'refused': class _NoPerform has no perform method"),
        (_PerformNotCallable, "class _PerformNotCallable has no perform method"),
    ],
)
def test_a_worker_that_cannot_take_args_and_job_is_refused_in_one_line(
    target: Any, message: str
) -> None:
    local = WorkerRegistry()
    with pytest.raises(InvalidArgumentError) as refused:
        local.worker("refused")(target)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)
    assert "refused" not in local


def test_a_spec_registered_directly_is_checked_too() -> None:
    local = WorkerRegistry()
    with pytest.raises(InvalidArgumentError, match=r"worker 'direct': _one_arg\(url\) cannot"):
        local.register(WorkerSpec(name="direct", perform=_one_arg))  # type: ignore[arg-type]
    assert "direct" not in local


def test_an_unnamed_worker_is_named_by_its_function() -> None:
    with pytest.raises(InvalidArgumentError, match="worker '_one_arg': _one_arg"):
        WorkerRegistry().worker(_one_arg)


def _takes_a_prefix(prefix: str, args: Any, job: Job) -> str:
    return f"{prefix}{args['n']}"


class _Callable:
    def __call__(self, args: Any, job: Job) -> str:
        return f"call{args['n']}"


class _Static:
    @staticmethod
    def perform(args: Any, job: Job) -> str:
        return f"static{args['n']}"


class _ClassMethod:
    @classmethod
    def perform(cls, args: Any, job: Job) -> str:
        return f"{cls.__name__}{args['n']}"


def _star_args(*values: Any) -> str:
    return f"star{values[0]['n']}"


def _defaults(args: Any, job: Job, extra: str = "d") -> str:
    return f"{extra}{args['n']}"


async def _async_both(args: Any, job: Job) -> str:
    return f"async{args['n']}"


@pytest.mark.parametrize(
    ("target", "result"),
    [
        (functools.partial(_takes_a_prefix, "p"), "p1"),
        (_Callable(), "call1"),
        (_Static, "static1"),
        (_ClassMethod, "_ClassMethod1"),
        (_star_args, "star1"),
        (_defaults, "d1"),
        (_async_both, "async1"),
    ],
)
def test_every_callable_that_takes_args_and_job_is_accepted_and_runs(
    target: Any, result: str
) -> None:
    local = WorkerRegistry()
    local.worker("accepted")(target)
    outcome = perform_job(local.get("accepted"), {"n": 1})
    assert isinstance(outcome, Done) and outcome.result == result
