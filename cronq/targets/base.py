"""The contract between the engine and a target (DESIGN §5): one call to start, one to abort.

`invoke` runs after the invocation is committed as STARTING (DESIGN §2), so it must not raise
for anything the target does: a failure is an outcome to record, not a crash to retry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

import redis

from cronq.statemachine import Invocation, InvocationStatus

if TYPE_CHECKING:
    from cronq.config import JobSpec

__all__ = [
    "MAX_ERROR_LENGTH",
    "Accepted",
    "Finished",
    "InvocationContext",
    "Target",
    "bounded",
    "describe_error",
    "redact",
]

MAX_ERROR_LENGTH = 2000
"""Errors end up in every history row; a huge traceback or response must not bloat Redis."""
_CUT = "... (truncated)"


@dataclass(frozen=True)
class InvocationContext:
    """Everything a target may know about the invocation it runs."""

    job_id: str
    invocation_id: str
    scheduled_for: datetime
    attempt: int
    payload: Any
    metadata: Mapping[str, str]
    deadline: datetime
    """Soft timeout (an aware instant): the target must give up by then."""
    namespace: str

    @classmethod
    def of(
        cls, namespace: str, job_id: str, spec: JobSpec, invocation: Invocation
    ) -> InvocationContext:
        """The context of a committed invocation of the job `spec` describes."""
        return cls(
            job_id=job_id,
            invocation_id=invocation.id,
            scheduled_for=invocation.scheduled_for,
            attempt=invocation.attempt,
            payload=spec.payload,
            metadata=spec.metadata,
            deadline=invocation.deadline,
            namespace=namespace,
        )

    def seconds_left(self) -> float:
        """Time to the deadline from the wall clock now; negative once it has passed."""
        return (self.deadline - datetime.now(timezone.utc)).total_seconds()


@dataclass(frozen=True)
class Finished:
    """The target ran synchronously: SUCCEEDED, FAILED or TIMED_OUT."""

    outcome: InvocationStatus
    error: str | None = None


@dataclass(frozen=True)
class Accepted:
    """The target runs elsewhere; its outcome is reported later (`cronq.engine.report_outcome`)."""

    detail: str = ""


class Target(Protocol):
    """One kind of target; `cronq.targets.target_for` builds one from its config spec."""

    def invoke(self, context: InvocationContext, connection: redis.Redis) -> Finished | Accepted:
        """Start the invocation; never raises for a failure of the target itself."""
        ...

    def abort(self, invocation_id: str, connection: redis.Redis) -> None:
        """Best effort: stop the invocation if it is still running somewhere."""
        ...


def describe_error(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """`Type: message`, with `secrets` masked and the length bounded, for a history row."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return bounded(redact(text, secrets))


def redact(text: str, secrets: Iterable[str]) -> str:
    """Mask every occurrence of each secret; longest first so a secret's prefix cannot leak
    the rest. Values shorter than 4 characters are left alone: masking them mangles text and
    protects nothing."""
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def bounded(text: str) -> str:
    """Cut `text` to MAX_ERROR_LENGTH characters, saying so."""
    if len(text) <= MAX_ERROR_LENGTH:
        return text
    return text[: MAX_ERROR_LENGTH - len(_CUT)] + _CUT
