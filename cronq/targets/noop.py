"""The `noop` target: sleeps and/or fails on request, for tests, demos and benchmarks."""

from __future__ import annotations

import time

import redis

from cronq.statemachine import InvocationStatus
from cronq.target_specs import NoopTarget
from cronq.targets.base import Finished, InvocationContext

__all__ = ["NoopInvoker"]


class NoopInvoker:
    """Runs inside the engine's task, so it keeps to the deadline like any real target."""

    def __init__(self, spec: NoopTarget) -> None:
        self.spec = spec

    def invoke(self, context: InvocationContext, connection: redis.Redis) -> Finished:
        sleep = self.spec.sleep.total_seconds()
        left = context.seconds_left()
        if sleep > left:
            time.sleep(max(left, 0.0))
            return Finished(
                InvocationStatus.TIMED_OUT, f"noop: sleep {sleep:g}s would pass the deadline"
            )
        time.sleep(sleep)
        if self.spec.fail:
            return Finished(InvocationStatus.FAILED, "noop: fail: true")
        return Finished(InvocationStatus.SUCCEEDED)

    def abort(self, invocation_id: str, connection: redis.Redis) -> None:
        """Nothing to stop: a noop invocation ends within its deadline on its own."""
