"""Config files to validated projects, with every problem of every file (DESIGN §6).

`load_paths` is what `cronq validate` and `cronq apply` share: apply must see all problems of all
files before it touches anything, so nothing here stops at the first problem or raises on bad
input. Nothing here touches Redis or imports job functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pydantic import ValidationError

from cronq.config import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    JOB_NAME,
    ConfigFile,
    JobSpec,
    check_project_name,
)
from cronq.config_problems import ConfigProblem, Loc, describe_error, format_field
from cronq.config_source import Source, read_source
from cronq.policies import Misfire, Overlap
from cronq.schedule import ScheduleError

__all__ = ["LoadResult", "LoadedProject", "load_paths"]


@dataclass(frozen=True)
class LoadedProject:
    """A valid project and the file it came from."""

    name: str
    file: str
    config: ConfigFile

    @property
    def jobs(self) -> list[JobSpec]:
        return self.config.jobs

    def job_ids(self) -> list[str]:
        return self.config.job_ids(self.name)


@dataclass
class LoadResult:
    """Projects of the files without problems; problems and warnings of all files, in order."""

    projects: list[LoadedProject] = field(default_factory=list)
    problems: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def job_count(self) -> int:
        return sum(len(project.jobs) for project in self.projects)


def load_paths(
    paths: Iterable[str | Path],
    *,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    now: datetime | None = None,
) -> LoadResult:
    """Read, validate and cross-check config files. A path given twice is read once; a project
    defined in two files is a problem. `now` (default: the clock) only decides warnings such as
    "never fires"."""
    now = now or datetime.now(timezone.utc)
    result = LoadResult()
    seen: set[Path] = set()
    owners: dict[str, str] = {}
    for given in paths:
        path = Path(given)
        key = path.resolve() if path.exists() else path
        if key in seen:
            continue
        seen.add(key)
        file = _FileCheck(str(given), path, max_payload_bytes, now)
        project = file.run()
        if project is not None and project.name in owners:
            file.problem(
                ("project",),
                f"project {project.name!r} is also defined in {owners[project.name]}",
                line=file.source.line_of(("project",)),
            )
            project = None
        if project is not None:
            owners[project.name] = file.name
            result.projects.append(project)
        result.problems += sorted(file.problems, key=_line_order)
        result.warnings += sorted(file.warnings, key=_line_order)
    return result


def _line_order(problem: ConfigProblem) -> int:
    return problem.line or 0


class _FileCheck:
    """The problems and warnings of one file, placed at their lines and jobs."""

    def __init__(self, name: str, path: Path, max_payload_bytes: int, now: datetime) -> None:
        self.name = name
        self.path = path
        self.max_payload_bytes = max_payload_bytes
        self.now = now
        self.source = Source()
        self.problems: list[ConfigProblem] = []
        self.warnings: list[ConfigProblem] = []

    def run(self) -> LoadedProject | None:
        self.source = read_source(self.path)
        for issue in self.source.issues:
            self.problem(issue.loc, issue.message, line=issue.line)
        data = self.source.data
        if data is None:
            return None
        project = self._project_name(data)
        jobs = data.get("jobs") if isinstance(data, Mapping) else None
        context = {
            "max_payload_bytes": self.max_payload_bytes,
            "job_lines": [
                self.source.line_of(("jobs", index))
                for index in range(len(jobs) if isinstance(jobs, list) else 0)
            ],
        }
        try:
            config = ConfigFile.model_validate(data, context=context)
        except ValidationError as exc:
            for error in exc.errors():
                self.problem(error["loc"], describe_error(ConfigFile, error))
            return None
        if self.problems or project is None:
            return None
        self._warn_about(config, jobs if isinstance(jobs, list) else [])
        return LoadedProject(config.project or project, self.name, config)

    def _project_name(self, data: object) -> str | None:
        """The `project:` key, or else the file's stem, which must then be a valid name."""
        if isinstance(data, Mapping) and "project" in data:
            given = data["project"]
            return given if isinstance(given, str) else None
        try:
            return check_project_name(self.path.stem)
        except ValueError:
            self.problem(
                ("project",),
                f"no `project:` given, and the file name {self.path.stem!r} is not a project "
                "name (lowercase letters, digits, '_', '-', '.'); add `project: NAME`",
                line=1,
            )
            return None

    def _warn_about(self, config: ConfigFile, raw_jobs: list[object]) -> None:
        if not config.jobs:
            self.warn(("jobs",), "no jobs: applying this file removes every job of the project")
        for index, (job, raw) in enumerate(zip(config.jobs, raw_jobs, strict=False)):
            own = set(raw) if isinstance(raw, Mapping) else set()
            for loc, message in _job_warnings(job, own, self.now):
                self.warn(("jobs", index, *loc), message)

    def problem(self, loc: Loc, message: str, *, line: int | None = None) -> None:
        self.problems.append(self._place(loc, message, line))

    def warn(self, loc: Loc, message: str) -> None:
        self.warnings.append(self._place(loc, message, None))

    def _place(self, loc: Loc, message: str, line: int | None) -> ConfigProblem:
        if line is None:
            line = self.source.line_of(loc)
        if len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int):
            return ConfigProblem(
                self.name, line, self._job_label(loc[1]), format_field(loc[2:]), message
            )
        return ConfigProblem(self.name, line, None, format_field(loc), message)

    def _job_label(self, index: int) -> str:
        """The job's name as written if it is a valid one, else `#N` (its place in the file)."""
        data = self.source.data
        jobs = data.get("jobs") if isinstance(data, Mapping) else None
        if isinstance(jobs, list) and index < len(jobs) and isinstance(jobs[index], Mapping):
            name = jobs[index].get("name")
            if isinstance(name, str) and JOB_NAME.fullmatch(name):
                return name
        return f"#{index + 1}"


def _job_warnings(job: JobSpec, own: set[str], now: datetime) -> list[tuple[Loc, str]]:
    """Things that are valid but almost certainly not what the author meant. Settings a job
    merely inherits from `defaults` are not warned about: they are meant for other jobs."""
    found: list[tuple[Loc, str]] = []
    never = _never_fires(job, now)
    if never:
        found.append((("schedule",), never))
    unused = (
        ("max_pending", job.overlap is not Overlap.QUEUE, "overlap: queue"),
        ("max_concurrent", job.overlap is not Overlap.ALLOW, "overlap: allow"),
        ("max_catch_up", job.misfire is not Misfire.CATCH_UP, "misfire: catch_up"),
    )
    for name, ignored, needs in unused:
        if name in own and ignored:
            found.append(((name,), f"has no effect without {needs}"))
    if job.http is not None and job.http.timeout > job.timeout:
        found.append(
            (("http", "timeout"), "longer than the job's timeout, which ends the invocation")
        )
    return found


def _never_fires(job: JobSpec, now: datetime) -> str | None:
    try:
        schedule = job.parsed_schedule()
    except ScheduleError:  # pragma: no cover  (validated already)
        return None
    if schedule is None or schedule.manual:
        return None
    begin = job.start.resolve(now) if job.start is not None else now
    first = schedule.next_after(begin - timedelta(microseconds=1), anchor=begin)
    if first is None:
        return "never fires"
    if job.until is not None and first > job.until.resolve(begin):
        return f"never fires: its first time {first.isoformat()} is after until ({job.until})"
    return None
