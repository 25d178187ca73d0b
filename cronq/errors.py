"""The errors of cronq's Python API, in one place to import them from (`from cronq import ...`).

`UnknownJob` and `JobRefused` are the engine's own: the API raises exactly what the engine does.
"""

from __future__ import annotations

from collections.abc import Iterable

from cronq.config_problems import ConfigProblem
from cronq.engine import JobRefused, UnknownJob

__all__ = ["ConfigError", "JobExists", "JobRefused", "UnknownJob"]


class JobExists(ValueError):
    """`Client.add(..., overwrite=False)` found a job with that id already."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} exists already (add it with overwrite=True to replace)")
        self.job_id = job_id


class ConfigError(ValueError):
    """A job, config file or module is invalid; nothing was written. `problems` holds every
    problem found, each rendered `file:line: job NAME: field: problem`."""

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))
