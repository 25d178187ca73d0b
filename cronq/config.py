"""The models of a config file (DESIGN §6): a project, its defaults and its jobs, validated.

`ConfigFile.model_validate(data)` is the whole check, usable without any file (the Python API and
`apply --module` build jobs in code); `cronq.loader` adds reading files and line numbers. Checks
that involve several fields live in wrap validators so that they are reported together with the
field errors of the same job instead of only after those are fixed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from cronq.bounded import short_repr, text_map
from cronq.durations import Duration
from cronq.jsondata import JsonData, json_size
from cronq.policies import (
    DEFAULT_MAX_CATCH_UP,
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_PENDING,
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_TIMEOUT,
    FailurePolicy,
    Misfire,
    Overlap,
    StrictModel,
)
from cronq.schedule import Schedule, ScheduleError, parse_schedule, parse_timezone
from cronq.target_specs import (
    TARGET_KEYS,
    HttpTarget,
    NoopTarget,
    PositiveDuration,
    RqTarget,
    Target,
)
from cronq.timepoint import TimePoint, TimePointField

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "MAX_JOBS_PER_FILE",
    "ConfigFile",
    "JobSettings",
    "JobSpec",
    "check_job_name",
    "check_project_name",
    "config_json_schema",
    "job_id",
]

DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024
MAX_JOBS_PER_FILE = 10_000

PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_METADATA_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,127}")


def check_project_name(value: str) -> str:
    """DESIGN §6 says `[a-z0-9][a-z0-9_-]{0,62}`; `.` is allowed too because
    `cronq apply --module myapp.jobs` names its project after the module, `myapp.jobs`."""
    if not PROJECT_NAME.fullmatch(value):
        raise ValueError(
            f"invalid project name {value!r}: use 1-63 lowercase letters, digits, '_', '-' or "
            "'.', starting with a letter or digit"
        )
    return value


def check_job_name(value: str) -> str:
    if not JOB_NAME.fullmatch(value):
        raise ValueError(
            f"invalid job name {value!r}: use 1-128 letters, digits, '_', '-' or '.', starting "
            "with a letter or digit"
        )
    return value


def job_id(project: str, name: str) -> str:
    """The id of a job everywhere outside its file: `project/name`."""
    return f"{project}/{name}"


def _timezone(value: str) -> str:
    try:
        parse_timezone(value)
    except ScheduleError as exc:
        raise ValueError(exc.problem) from None
    return value


def _failure_policy_schema(schema: dict[str, Any]) -> None:
    """FailurePolicy also accepts a bare name (`failure_policy: drop`); say so in the schema."""
    ref = schema.pop("$ref", None) or schema.pop("allOf", [{}])[0].get("$ref")
    schema["anyOf"] = [
        {"type": "string", "enum": ["drop", "exponential"]},
        {"$ref": ref},
    ]


class JobSettings(StrictModel):
    """Policy and timing fields of a job. A file's `defaults` may give any of them; a job's own
    value wins over the default."""

    timezone: Annotated[str, AfterValidator(_timezone)] = Field(
        default="UTC",
        max_length=64,
        description="IANA zone the schedule's fields are read in",
        examples=["Europe/Berlin"],
    )
    timeout: PositiveDuration = Field(
        default=DEFAULT_TIMEOUT,
        description="deadline of one invocation; past it (plus a grace) the watchdog ends it",
    )
    overlap: Overlap = Field(
        default=Overlap.SKIP, description="what a tick does while an invocation is still active"
    )
    max_pending: int = Field(
        default=DEFAULT_MAX_PENDING,
        ge=1,
        le=1000,
        strict=True,
        description="overlap=queue: ticks waiting at most; more are recorded as skipped",
    )
    max_concurrent: int = Field(
        default=DEFAULT_MAX_CONCURRENT,
        ge=1,
        le=1000,
        strict=True,
        description="overlap=allow: invocations running at once at most",
    )
    misfire: Misfire = Field(
        default=Misfire.COALESCE,
        description="what happens to ticks processed long after their time (workers were down)",
    )
    misfire_grace: Duration = Field(
        default=DEFAULT_MISFIRE_GRACE, description="how late a tick may be and still be on time"
    )
    max_catch_up: int = Field(
        default=DEFAULT_MAX_CATCH_UP,
        ge=1,
        le=100_000,
        strict=True,
        description="misfire=catch_up: missed ticks run at most",
    )
    failure_policy: FailurePolicy = Field(
        default_factory=FailurePolicy,
        description="retries when the target fails: drop, or {constant|cron|exponential: {...}}",
        json_schema_extra=_failure_policy_schema,
    )
    metadata: Annotated[
        dict[str, str],
        BeforeValidator(
            text_map(
                what="metadata entries",
                max_items=64,
                key_pattern=_METADATA_KEY,
                key_rule="a key is 1-128 letters, digits, '_', '.', '/' or '-'",
                max_value=1024,
            )
        ),
    ] = Field(
        default_factory=dict,
        description="labels (text: text) carried by every invocation; defaults merge key by key",
    )

    @classmethod
    def lenient(cls, raw: object) -> JobSettings:
        """The settings of `raw` that are valid. Invalid ones are reported where `defaults` is
        validated; leaving them out here keeps them from being reported again for every job."""
        if not isinstance(raw, Mapping):
            return cls()
        data = dict(raw)
        for _ in range(2):
            try:
                return cls.model_validate(data)
            except ValidationError as exc:
                bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
                data = {key: value for key, value in data.items() if key not in bad}
        return cls()

    def apply_to(self, job: Mapping[str, object]) -> dict[str, object]:
        """`job` (a raw mapping) with the settings it does not give itself filled in."""
        merged = dict(job)
        for key in self.model_fields_set:
            if key not in merged:
                merged[key] = getattr(self, key)
            elif key == "metadata" and isinstance(merged[key], Mapping):
                merged[key] = {**self.metadata, **merged[key]}  # type: ignore[dict-item]
        return merged


def _schedule_problem(exc: ScheduleError) -> str:
    return f"{exc.field}: {exc.problem}" if exc.field else exc.problem


class JobSpec(JobSettings):
    """One job: when it fires (schedule, lifetime), how (policies) and what it does (target)."""

    name: Annotated[str, AfterValidator(check_job_name)] = Field(
        description="unique in the project; the job id is project/name", examples=["nightly"]
    )
    description: str | None = Field(default=None, max_length=2000, description="for people")
    schedule: str | None = Field(
        default=None,
        max_length=256,
        description="cron (5-7 fields, seconds first), @daily..., '@every 90s' or 'triggered'; "
        "leave out with a start for a one-shot job",
        examples=["0 30 2 * * *", "@every 30s", "triggered"],
    )
    start: TimePointField | None = Field(
        default=None,
        description="first tick not before this: RFC 3339 time, or a duration after apply time",
    )
    until: TimePointField | None = Field(
        default=None,
        description="no tick after this: RFC 3339 time, or a duration after start",
    )
    repeats: int | None = Field(
        default=None, gt=0, le=10**9, strict=True, description="the job fires this many times"
    )
    payload: JsonData = Field(default=None, description="any JSON value handed to every invocation")
    rq: RqTarget | None = Field(default=None, description="target: enqueue an RQ job")
    http: HttpTarget | None = Field(default=None, description="target: fetch a URL")
    noop: NoopTarget | None = Field(default=None, description="target: do nothing (tests)")

    _parsed: Schedule | None = PrivateAttr(default=None)

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Checked in the job's zone when that is valid (fields are validated in order, and
        `timezone` comes first); a bad zone is reported on its own."""
        if value is None:
            return None
        value = value.strip()
        if not value:
            raise ValueError("empty schedule")
        try:
            parse_schedule(value, info.data.get("timezone", "UTC"))
        except ScheduleError as exc:
            raise ValueError(_schedule_problem(exc)) from None
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _whole_job(cls, data: Any, handler: Callable[[Any], JobSpec], info: ValidationInfo) -> Any:
        if isinstance(data, JobSpec):
            return data
        if (info.context or {}).get("stored"):
            return handler(data)  # checked as a whole when applied; read back at every step
        found = _shape_errors(data) if isinstance(data, Mapping) else []
        if isinstance(data, Mapping):
            found += _lifetime_errors(data.get("start"), data.get("until"))
        try:
            job = handler(data)
        except ValidationError as exc:
            if not found:
                raise
            raise _combined(cls.__name__, exc, found) from None
        limit = (info.context or {}).get("max_payload_bytes", DEFAULT_MAX_PAYLOAD_BYTES)
        found += job._consistency_errors(limit)
        if found:
            raise _combined(cls.__name__, None, found)
        return job

    def _consistency_errors(self, max_payload_bytes: int) -> list[InitErrorDetails]:
        found: list[InitErrorDetails] = []
        if self.schedule is None and self.repeats is not None and self.repeats > 1:
            found.append(
                _error(
                    ("repeats",),
                    "a one-shot job (a start and no schedule) fires once; add a schedule",
                    self.repeats,
                )
            )
        sizes = self._payload_sizes()
        total = sum(sizes.values())
        if total > max_payload_bytes:
            biggest = max(sizes, key=lambda path: sizes[path])
            found.append(
                _error(
                    tuple(biggest.split(".")),
                    f"payload, metadata, args, kwargs and body take {total} bytes as JSON; "
                    f"at most {max_payload_bytes} are allowed",
                    "...",
                )
            )
        return found

    def _payload_sizes(self) -> dict[str, int]:
        """JSON sizes of the free-form parts a tick copies into every RQ job it enqueues."""
        parts: dict[str, object] = {"payload": self.payload, "metadata": self.metadata}
        if self.rq is not None:
            parts |= {"rq.args": self.rq.args, "rq.kwargs": self.rq.kwargs}
        if self.http is not None:
            parts["http.body"] = self.http.body
        return {path: json_size(value) for path, value in parts.items()}

    @property
    def target(self) -> Target:
        """The one target of the job (validation guarantees there is exactly one)."""
        target = self.rq or self.http or self.noop
        assert target is not None
        return target

    @property
    def zone(self) -> ZoneInfo:
        return parse_timezone(self.timezone)

    @property
    def one_shot(self) -> bool:
        return self.schedule is None

    def parsed_schedule(self) -> Schedule | None:
        """The schedule bound to the job's zone (None for a one-shot job); parsed once."""
        if self.schedule is not None and self._parsed is None:
            self._parsed = parse_schedule(self.schedule, self.timezone)
        return self._parsed

    def job_id(self, project: str) -> str:
        return job_id(project, self.name)


def _shape_errors(raw: Mapping[Any, Any]) -> list[InitErrorDetails]:
    """Rules about which keys a job has, checkable before (and whatever) their values are."""
    found: list[InitErrorDetails] = []
    targets = [key for key in raw if key in TARGET_KEYS and raw[key] is not None]
    if not targets:
        found.append(_error((), "needs a target: one of rq, http or noop", None))
    for extra in targets[1:]:
        found.append(
            _error((extra,), f"a job has exactly one target, and this one has {targets[0]}", None)
        )
    if raw.get("schedule") is None and raw.get("start") is None:
        found.append(
            _error(
                ("schedule",),
                "required: a cron expression, a macro, '@every <duration>' or 'triggered' "
                "(or leave it out and give a start time for a one-shot job)",
                None,
            )
        )
    return found


def _lifetime_errors(raw_start: object, raw_until: object) -> list[InitErrorDetails]:
    """`until` must come after `start`. Checked on the raw values (when both can be read) so it
    is reported together with any field errors of the job."""
    start, until = _time_point_or_none(raw_start), _time_point_or_none(raw_until)
    if until is None:
        return []
    if until.after is not None and until.after <= timedelta(0):
        return [_error(("until",), "a duration after start must be longer than 0s", raw_until)]
    if start is not None and start.at and until.at and until.at <= start.at:
        return [_error(("until",), f"must be after start ({start})", raw_until)]
    return []


def _time_point_or_none(raw: object) -> TimePoint | None:
    """None when absent or invalid (an invalid one is reported by its field)."""
    try:
        return TimePoint.parse(raw) if raw is not None else None
    except ValueError:
        return None


def _error(loc: tuple[str | int, ...], message: str, value: object) -> InitErrorDetails:
    return {"type": PydanticCustomError("cronq_config", message), "loc": loc, "input": value}


def _combined(
    title: str, exc: ValidationError | None, extra: list[InitErrorDetails]
) -> ValidationError:
    """One ValidationError holding the field errors of `exc` and the cross-field ones."""
    details: list[InitErrorDetails] = []
    for error in exc.errors() if exc is not None else []:
        context = {key: value for key, value in (error.get("ctx") or {}).items() if key != "error"}
        details.append(
            {
                "type": PydanticCustomError(error["type"], error["msg"], context or None),
                "loc": error["loc"],
                "input": error["input"],
            }
        )
    return ValidationError.from_exception_data(title, [*details, *extra])


class ConfigFile(StrictModel):
    """A cronq config file, YAML or TOML: one project, defaults for its jobs, and the jobs.

    Example (YAML):

        project: billing
        defaults: {timezone: Europe/Berlin, timeout: 10m}
        jobs:
          - name: nightly-report
            schedule: "0 30 2 * * *"
            rq: {func: billing.reports.nightly, queue: reports}
    """

    project: Annotated[str, AfterValidator(check_project_name)] | None = Field(
        default=None,
        description="project name (default: the file name without its extension); "
        "lowercase letters, digits, '_', '-', '.'",
        examples=["billing"],
    )
    defaults: JobSettings = Field(
        default_factory=JobSettings, description="settings every job gets unless it sets its own"
    )
    jobs: list[JobSpec] = Field(
        max_length=MAX_JOBS_PER_FILE,
        description="the jobs; a job left out of the file is removed when the file is applied",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _whole_file(
        cls, data: Any, handler: Callable[[Any], ConfigFile], info: ValidationInfo
    ) -> Any:
        if isinstance(data, ConfigFile) or not isinstance(data, Mapping):
            return handler(data)
        jobs = data.get("jobs")
        if isinstance(jobs, list):
            settings = JobSettings.lenient(data.get("defaults"))
            merged = [settings.apply_to(job) if isinstance(job, Mapping) else job for job in jobs]
            data = {**data, "jobs": merged}
        found = _duplicate_names(jobs, (info.context or {}).get("job_lines"))
        try:
            result = handler(data)
        except ValidationError as exc:
            if not found:
                raise
            raise _combined(cls.__name__, exc, found) from None
        if found:
            raise _combined(cls.__name__, None, found)
        return result

    def job_ids(self, project: str) -> list[str]:
        return [job.job_id(project) for job in self.jobs]


def _duplicate_names(jobs: object, lines: list[int] | None) -> list[InitErrorDetails]:
    if not isinstance(jobs, list):
        return []
    first: dict[str, int] = {}
    found: list[InitErrorDetails] = []
    for index, job in enumerate(jobs):
        name = job.get("name") if isinstance(job, Mapping) else None
        if not isinstance(name, str):
            continue
        if name not in first:
            first[name] = index
            continue
        earlier = first[name]
        where = f"line {lines[earlier]}" if lines and earlier < len(lines) else f"#{earlier + 1}"
        message = f"duplicate job name {short_repr(name)} (first at {where})"
        found.append(_error(("jobs", index, "name"), message, name))
    return found


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of a config file (what `cronq schema` prints)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **ConfigFile.model_json_schema(),
        "title": "cronq config file",
    }
