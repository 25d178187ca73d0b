"""The config files of `cronq run`: checked, applied, and applied again when one changes.

Files are polled (size and modification time, once a second) rather than watched with inotify:
portable, no dependency, and a second of delay is nothing for a schedule. A file that stops being
valid is reported and not applied: the last good config keeps running, untouched.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from cronq.apply import ProjectPlan, apply_project
from cronq.config import JobSpec
from cronq.engine import Engine
from cronq.loader import LoadResult, load_paths
from cronq.target_specs import RqTarget

__all__ = ["ConfigFiles", "apply_all", "declared", "report", "user_queues"]

_Stamp = tuple[int, int] | None


class ConfigFiles:
    """The files given with --config and what they looked like when last read."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(paths)
        self._stamps = self._current()

    def load(self) -> LoadResult:
        """Read every file (remembering how it looked); problems of all files, none raised."""
        self._stamps = self._current()
        return load_paths(self.paths)

    def forget(self) -> None:
        """Read the files again at the next look, changed or not (the last apply failed)."""
        self._stamps = ()

    def changed(self) -> bool:
        return self._current() != self._stamps

    def _current(self) -> tuple[_Stamp, ...]:
        return tuple(_stamp(path) for path in self.paths)


def _stamp(path: str) -> _Stamp:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def report(result: LoadResult, warn: Callable[[str], None]) -> bool:
    """Print warnings and problems (`file:line: ...`); whether the files can be applied."""
    for warning in result.warnings:
        warn(f"warning: {warning}")
    for problem in result.problems:
        warn(str(problem))
    return result.ok


def apply_all(engine: Engine, result: LoadResult, say: Callable[[str], None]) -> list[ProjectPlan]:
    """Apply every project, printing what changed (`+ hello/tick`) and a summary per project."""
    plans = [apply_project(engine, project) for project in result.projects]
    for plan in plans:
        for change in plan.changes:
            say(str(change))
        say(plan.summary())
    return plans


def declared(result: LoadResult) -> tuple[list[str], list[JobSpec]]:
    """The ids and specs of the jobs the files declare."""
    ids = [job_id for project in result.projects for job_id in project.job_ids()]
    return ids, [spec for project in result.projects for spec in project.jobs]


def user_queues(specs: Iterable[JobSpec]) -> set[str]:
    """The RQ queues where `rq` targets send users' functions."""
    return {spec.target.queue for spec in specs if isinstance(spec.target, RqTarget)}
