"""Jobs declared in Python: `@cronq.job(...)` on a module-level function (DESIGN §6, the FTL
"verbs declare themselves as jobs"), and the validation the Python API shares with it.

The decorator only marks the function; nothing is validated or written at import time, so a bad
schedule cannot make the user's module unimportable. `cronq apply --module M` (and
`Client.apply`) imports M and turns its marked functions into project `M` with `rq` targets, with
the same models, checks and problem lines as a config file.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from pydantic import ValidationError

from cronq.config import ConfigFile
from cronq.config_problems import ConfigProblem, describe_error, format_field
from cronq.loader import LoadedProject, LoadResult, load_paths
from cronq.target_specs import TARGET_KEYS

__all__ = [
    "MARK",
    "JobMark",
    "Place",
    "job",
    "load_sources",
    "project_from_module",
    "validate_jobs",
]

F = TypeVar("F", bound=Callable[..., Any])

MARK = "__cronq_job__"
"""The attribute `@cronq.job` sets on the function it marks."""


@dataclass(frozen=True)
class JobMark:
    """What `@cronq.job` recorded: the job's fields, except its target (the function)."""

    fields: Mapping[str, Any]
    name: str | None = None
    queue: str = "default"


def job(
    schedule: str | None = None, *, name: str | None = None, queue: str = "default", **fields: Any
) -> Callable[[F], F]:
    """Declare the decorated module-level function a cronq job of project `its.module`.

    `schedule` and `fields` are a config file's job fields (timezone, timeout, overlap,
    failure_policy, start, ...). The job's name is the function's (or `name`); its target is
    `rq: {func: module.function, queue: queue}`. The function is returned unchanged.
    """
    if callable(schedule):
        raise TypeError("use @cronq.job(SCHEDULE, ...) with parentheses, e.g. @cronq.job('@daily')")
    declared = dict(fields) if schedule is None else {"schedule": schedule, **fields}

    def mark(function: F) -> F:
        setattr(function, MARK, JobMark(declared, name, queue))
        return function

    return mark


@dataclass(frozen=True)
class Place:
    """Where a job declared in code comes from, for its problems: a file, maybe a line."""

    file: str
    line: int | None = None


def validate_jobs(
    project: str, jobs: Sequence[Mapping[str, Any]], places: Sequence[Place], file: str
) -> LoadResult:
    """Validate jobs given as raw mappings the way a config file's are. `file` names the source
    (the origin apply stores); problems of job i are placed at `places[i]`."""
    result = LoadResult()
    try:
        config = ConfigFile.model_validate({"project": project, "jobs": list(jobs)})
    except ValidationError as exc:
        for error in exc.errors():
            loc = error["loc"]
            message = describe_error(ConfigFile, error)
            if len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int):
                where, label = places[loc[1]], str(jobs[loc[1]].get("name"))
                field = format_field(loc[2:])
                result.problems.append(ConfigProblem(where.file, where.line, label, field, message))
            else:
                problem = ConfigProblem(file, None, None, format_field(loc), message)
                result.problems.append(problem)
        return result
    result.projects.append(LoadedProject(project, file, config))
    return result


def project_from_module(module_name: str) -> LoadResult:
    """Import `module_name` and validate its decorated functions as project `module_name`."""
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # not found, or the module itself raised: either way, say which
        message = f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        return LoadResult(problems=[ConfigProblem(module_name, None, None, None, message)])
    functions = _marked_functions(module)
    problems = [problem for f in functions for problem in _call_problems(module_name, f)]
    jobs = [_job_fields(module_name, f) for f in functions]
    places = [_place(f) for f in functions]
    result = validate_jobs(module_name, jobs, places, f"module:{module_name}")
    result.problems[:0] = problems
    if problems:
        result.projects.clear()
    if not functions:
        message = "no @cronq.job functions: applying it removes every job of its project"
        result.warnings.append(ConfigProblem(module_name, None, None, None, message))
    return result


def load_sources(paths: Iterable[str], modules: Iterable[str]) -> LoadResult:
    """Config files and modules together, with every problem of all of them; a project may
    come from one source only."""
    result = load_paths(paths)
    owners = {project.name: project.file for project in result.projects}
    for module_name in dict.fromkeys(modules):
        loaded = project_from_module(module_name)
        result.problems += loaded.problems
        result.warnings += loaded.warnings
        for project in loaded.projects:
            if project.name in owners:
                message = f"project {project.name!r} is also defined in {owners[project.name]}"
                result.problems.append(ConfigProblem(module_name, None, None, None, message))
            else:
                owners[project.name] = project.file
                result.projects.append(project)
    return result


def _marked_functions(module: ModuleType) -> list[Callable[..., Any]]:
    """The module's own marked functions (not ones it imported), in source order."""
    found = {
        id(value): value
        for value in vars(module).values()
        if callable(value)
        and isinstance(getattr(value, MARK, None), JobMark)
        and getattr(value, "__module__", None) == module.__name__
    }
    return sorted(found.values(), key=lambda f: _place(f).line or 0)


def _job_fields(module_name: str, function: Callable[..., Any]) -> dict[str, Any]:
    mark: JobMark = getattr(function, MARK)
    target = {"func": f"{module_name}.{function.__qualname__}", "queue": mark.queue}
    return {**mark.fields, "name": mark.name or function.__name__, "rq": target}


def _call_problems(module_name: str, function: Callable[..., Any]) -> list[ConfigProblem]:
    """A job's function is called with no arguments: one that needs some can never run."""
    mark: JobMark = getattr(function, MARK)
    label, where = mark.name or function.__name__, _place(function)
    dotted = f"{module_name}.{function.__qualname__}"
    found: list[str] = []
    if "." in function.__qualname__:
        found.append("is not a module-level function; a worker could not import it")
    found += [
        f"sets {key}, but the target of a decorated function is the function"
        for key in TARGET_KEYS
        if key in mark.fields
    ]
    try:
        required = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    except (TypeError, ValueError):  # no signature to read: a worker will find out
        required = []
    if required:
        names = ", ".join(repr(name) for name in required)
        found.append(f"cannot be called without arguments (no default for {names})")
    return [ConfigProblem(where.file, where.line, label, None, f"{dotted}: {m}") for m in found]


def _place(function: Callable[..., Any]) -> Place:
    code = getattr(function, "__code__", None)
    file = inspect.getsourcefile(function) if code is not None else None
    if file is None:
        return Place(getattr(function, "__module__", "?"))
    with contextlib.suppress(ValueError):  # on another drive (Windows) it stays absolute
        file = os.path.relpath(file)
    return Place(file, code.co_firstlineno if code is not None else None)
