"""Targets: what an invocation does (DESIGN §5). `target_for(spec)` picks the implementation.

A new kind of target is one class with `invoke` and `abort` plus one line in `_FACTORIES`. A
target that only enqueues somewhere (`enqueues`) is invoked in batches by `cronq worker`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cronq.target_specs import HttpTarget, NoopTarget, RqTarget
from cronq.targets.base import Accepted, Finished, InvocationContext, Target
from cronq.targets.http import HttpInvoker
from cronq.targets.noop import NoopInvoker
from cronq.targets.rq import RqInvoker, allowed

__all__ = [
    "Accepted",
    "Finished",
    "InvocationContext",
    "Target",
    "allowed",
    "enqueues",
    "target_for",
]

_FACTORIES: dict[type[Any], Callable[[Any], Target]] = {
    RqTarget: RqInvoker,
    HttpTarget: HttpInvoker,
    NoopTarget: NoopInvoker,
}


def target_for(spec: RqTarget | HttpTarget | NoopTarget) -> Target:
    """The target that carries out `spec`."""
    try:
        factory = _FACTORIES[type(spec)]
    except KeyError:
        raise TypeError(f"no target for {type(spec).__name__}") from None
    return factory(spec)


def enqueues(spec: RqTarget | HttpTarget | NoopTarget) -> bool:
    """Whether invoking `spec` only hands the run to a queue: quick, so batched with others
    (`cronq.tasks.call_targets`) rather than given a thread of its own."""
    return isinstance(spec, RqTarget)
