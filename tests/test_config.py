"""Config models and loading: valid files give the expected jobs, bad ones exact problem lines."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cronq.config import ConfigFile, JobSpec, job_id
from cronq.loader import LoadResult, load_paths
from cronq.policies import FailurePolicy, Misfire, Overlap
from cronq.target_specs import HttpTarget, NoopTarget, RqTarget
from cronq.timepoint import TimePoint, parse_rfc3339

DATA = Path(__file__).parent / "data" / "config"
EXAMPLES = Path(__file__).parent.parent / "examples"
NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def load_text(tmp_path: Path, text: str, name: str = "proj.yaml", **kwargs: int) -> LoadResult:
    path = tmp_path / name
    path.write_text(text)
    return load_paths([path], now=NOW, **kwargs)


def problems(tmp_path: Path, text: str, name: str = "proj.yaml", **kwargs: int) -> list[str]:
    """Problem lines with the temporary directory cut off: `proj.yaml:3: ...`."""
    result = load_text(tmp_path, text, name, **kwargs)
    return [str(problem).replace(f"{tmp_path}/", "") for problem in result.problems]


def warnings(tmp_path: Path, text: str, name: str = "proj.yaml") -> list[str]:
    result = load_text(tmp_path, text, name)
    assert result.ok, result.problems
    return [str(warning).replace(f"{tmp_path}/", "") for warning in result.warnings]


# --- valid files ----------------------------------------------------------------------------------


def test_design_example_parses_with_defaults_applied() -> None:
    result = load_paths([EXAMPLES / "billing.yaml"], now=NOW)
    assert result.ok and not result.warnings
    (project,) = result.projects
    assert project.name == "billing"
    assert project.job_ids() == ["billing/nightly-report", "billing/ping", "billing/once"]
    report, ping, once = project.jobs
    for job in project.jobs:
        assert job.timezone == "Europe/Berlin"
        assert job.timeout == timedelta(minutes=10)
        assert job.overlap is Overlap.SKIP and job.misfire is Misfire.COALESCE
    assert report.target == RqTarget(func="billing.reports.nightly", queue="reports")
    assert report.failure_policy.constant is not None
    assert report.failure_policy.constant.delay == timedelta(seconds=30)
    assert report.failure_policy.constant.max_retries == 3
    assert isinstance(ping.target, HttpTarget)
    assert ping.target.method == "GET" and ping.target.timeout == timedelta(seconds=30)
    assert ping.target.is_success(204) and not ping.target.is_success(301)
    assert once.one_shot and once.start == TimePoint(
        at=datetime(2026, 12, 1, 9, tzinfo=timezone.utc)
    )
    assert once.target == NoopTarget()


def test_toml_gives_the_same_jobs_as_yaml() -> None:
    from_yaml = load_paths([EXAMPLES / "billing.yaml"], now=NOW)
    from_toml = load_paths([DATA / "billing.toml"], now=NOW)
    assert from_toml.ok, from_toml.problems
    assert [job.model_dump() for job in from_toml.projects[0].jobs] == [
        job.model_dump() for job in from_yaml.projects[0].jobs
    ]


def test_built_in_defaults(tmp_path: Path) -> None:
    result = load_text(tmp_path, "jobs:\n  - {name: a, schedule: '@daily', noop: {}}\n")
    job = result.projects[0].jobs[0]
    assert result.projects[0].name == "proj"  # the file's stem
    assert job.timezone == "UTC" and job.timeout == timedelta(minutes=5)
    assert (job.max_pending, job.max_concurrent, job.max_catch_up) == (10, 10, 100)
    assert job.misfire_grace == timedelta(seconds=60)
    assert job.failure_policy == FailurePolicy() and job.failure_policy.retry is None
    assert job.payload is None and job.metadata == {}


def test_job_overrides_defaults_and_metadata_merges(tmp_path: Path) -> None:
    text = """\
project: ops.jobs
defaults:
  timezone: Europe/Berlin
  overlap: queue
  metadata: {team: ops, tier: "2"}
jobs:
  - name: a
    schedule: "@hourly"
    timezone: America/New_York
    metadata: {tier: "1"}
    noop: {}
  - name: b
    schedule: "@hourly"
    noop: {}
"""
    a, b = load_text(tmp_path, text).projects[0].jobs
    assert (a.timezone, b.timezone) == ("America/New_York", "Europe/Berlin")
    assert a.overlap is Overlap.QUEUE and b.overlap is Overlap.QUEUE
    assert a.metadata == {"team": "ops", "tier": "1"}
    assert b.metadata == {"team": "ops", "tier": "2"}
    assert a.job_id("ops.jobs") == job_id("ops.jobs", "a") == "ops.jobs/a"


def test_lifetime_keeps_relative_and_absolute(tmp_path: Path) -> None:
    text = """\
jobs:
  - {name: a, schedule: "@every 1m", start: PT90S, until: 1h, repeats: 5, noop: {}}
  - {name: b, schedule: "@daily", start: "2027-01-01T00:00:00+01:00", until: 90, noop: {}}
"""
    a, b = load_text(tmp_path, text).projects[0].jobs
    assert a.start == TimePoint(after=timedelta(seconds=90)) and a.start.is_relative
    assert a.until == TimePoint(after=timedelta(hours=1)) and a.repeats == 5
    assert b.start is not None and b.start.at == datetime(2026, 12, 31, 23, tzinfo=timezone.utc)
    assert b.model_dump(mode="json")["start"] == "2027-01-01T00:00:00+01:00"
    assert a.model_dump(mode="json")["start"] == "1m30s"


def test_targets_in_full(tmp_path: Path) -> None:
    text = """\
jobs:
  - name: r
    schedule: "@daily"
    rq: {func: app.tasks.run, args: [1, "two", {three: 3}], kwargs: {dry_run: true}}
    payload: {any: [json, 1.5, null]}
  - name: h
    schedule: "@daily"
    http:
      url: https://example.com/hook?x=1
      method: post
      headers: {Authorization: Bearer x}
      body: {ping: true}
      timeout: 5s
      success_codes: [2xx, 304, "400-404"]
"""
    r, h = load_text(tmp_path, text).projects[0].jobs
    assert r.rq == RqTarget(
        func="app.tasks.run", args=[1, "two", {"three": 3}], kwargs={"dry_run": True}
    )
    assert r.payload == {"any": ["json", 1.5, None]}
    assert isinstance(h.target, HttpTarget) and h.target.method == "POST"
    assert h.target.success_codes == ((200, 299), (304, 304), (400, 404))
    assert h.model_dump(mode="json")["http"]["success_codes"] == ["200-299", "304", "400-404"]
    assert [h.target.is_success(code) for code in (201, 304, 403, 500)] == [1, 1, 1, 0]


def test_job_spec_works_without_a_file() -> None:
    job = JobSpec.model_validate({"name": "x", "schedule": "*/5 * * * *", "noop": {}})
    assert job.job_id("p") == "p/x"
    schedule = job.parsed_schedule()
    assert schedule is not None and schedule.next_after(NOW) == NOW + timedelta(minutes=5)
    with pytest.raises(ValidationError):
        JobSpec.model_validate({"name": "x", "noop": {}})


def test_config_file_model_reports_duplicates_without_lines() -> None:
    data = {"jobs": [{"name": "a", "start": "1s", "noop": {}}] * 2}
    with pytest.raises(ValidationError) as caught:
        ConfigFile.model_validate(data)
    (error,) = caught.value.errors()
    assert error["loc"] == ("jobs", 1, "name")
    assert error["msg"] == "duplicate job name 'a' (first at #1)"


# --- problems, with their lines -------------------------------------------------------------------

BAD_YAML = [
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    repeats: three\n    noop: {}\n",
        ["proj.yaml:4: job a: repeats: expected a whole number greater than 0, got 'three'"],
    ),
    (
        "jobs:\n  - name: a\n    schedul: '@daily'\n    noop: {}\n",
        [
            "proj.yaml:2: job a: schedule: required: a cron expression, a macro, "
            "'@every <duration>' or 'triggered' (or leave it out and give a start time for a "
            "one-shot job)",
            "proj.yaml:3: job a: schedul: unknown key; did you mean 'schedule'?",
        ],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    timeout: 5 minutes\n    noop: {}\n",
        [
            "proj.yaml:4: job a: timeout: invalid duration '5 minutes': expected "
            "<number><unit>... with units ms, s, m, h, d, w (e.g. '90s', '1h30m') or ISO 8601 "
            "(e.g. 'PT90S')"
        ],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    timeout: 0s\n    noop: {}\n",
        ["proj.yaml:4: job a: timeout: must be longer than 0s"],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    timezone: Mars/Olympus\n    noop: {}\n",
        [
            "proj.yaml:4: job a: timezone: unknown time zone 'Mars/Olympus' (expected an IANA "
            "name such as 'America/New_York')"
        ],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '0 61 * * *'\n    noop: {}\n",
        ["proj.yaml:3: job a: schedule: hour: 61 is out of range 0-23"],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    failure_policy:\n      constant:\n"
        "        delay: soon\n    noop: {}\n",
        [
            "proj.yaml:6: job a: failure_policy.constant.delay: invalid duration 'soon': "
            "expected <number><unit>... with units ms, s, m, h, d, w (e.g. '90s', '1h30m') or "
            "ISO 8601 (e.g. 'PT90S')"
        ],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    rq: {func: nightly}\n",
        [
            "proj.yaml:4: job a: rq.func: expected a dotted path to a function such as "
            "'billing.reports.nightly', got 'nightly'"
        ],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    http: {url: 'file:///etc/passwd'}\n",
        [
            "proj.yaml:4: job a: http.url: expected an http:// or https:// URL, got "
            "'file:///etc/passwd'"
        ],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    noop: {}\n    http:\n"
        "      url: http://x\n",
        ["proj.yaml:5: job a: http: a job has exactly one target, and this one has noop"],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@daily'\n",
        ["proj.yaml:2: job a: needs a target: one of rq, http or noop"],
    ),
    (
        "jobs:\n  - name: a\n    start: 1m\n    repeats: 2\n    noop: {}\n",
        [
            "proj.yaml:4: job a: repeats: a one-shot job (a start and no schedule) fires once; "
            "add a schedule"
        ],
    ),
    (
        "jobs:\n  - name: a\n    schedule: '@hourly'\n    start: '2027-01-02T00:00:00Z'\n"
        "    until: '2027-01-01T00:00:00Z'\n    noop: {}\n",
        ["proj.yaml:5: job a: until: must be after start (2027-01-02T00:00:00Z)"],
    ),
    (
        "jobs:\n  - name: a\n    start: '2027-01-02 10:00'\n    noop: {}\n",
        [
            "proj.yaml:3: job a: start: expected an RFC 3339 time with an offset such as "
            "'2026-12-01T09:00:00Z', got '2027-01-02 10:00'"
        ],
    ),
    (
        "jobs:\n  - name: a\n    start: 1s\n    noop: {}\n  - name: a\n    start: 1s\n"
        "    noop: {}\n",
        ["proj.yaml:5: job a: name: duplicate job name 'a' (first at line 2)"],
    ),
    (
        "jobs:\n  - name: a\n    start: 1s\n    start: 2s\n    noop: {}\n",
        ["proj.yaml:4: job a: start: duplicate key (first at line 3)"],
    ),
    (
        "jobs:\n  - name: has space\n    start: 1s\n    noop: {}\n",
        [
            "proj.yaml:2: job #1: name: invalid job name 'has space': use 1-128 letters, "
            "digits, '_', '-' or '.', starting with a letter or digit"
        ],
    ),
    (
        "jobs:\n  - start: 1s\n    noop: {}\n    overlap: sometimes\n    max_pending: 0\n",
        [
            "proj.yaml:2: job #1: name: required",
            "proj.yaml:4: job #1: overlap: expected 'skip', 'queue', 'allow' or 'replace', got "
            "'sometimes'",
            "proj.yaml:5: job #1: max_pending: expected a whole number of at least 1, got 0",
        ],
    ),
    (
        "jobs:\n  - name: a\n    start: 1s\n    noop: {fail: maybe}\n    metadata: {v: 1.1}\n",
        [
            "proj.yaml:4: job a: noop.fail: expected true or false, got 'maybe'",
            "proj.yaml:5: job a: metadata: v: expected text, got 1.1 (quote it)",
        ],
    ),
    (
        "jobs:\n  - name: a\n    start: 1s\n    noop: {}\n    payload: {when: !!binary aGk=}\n",
        ["proj.yaml:5: job a: payload.when: YAML tag !!binary is not supported"],
    ),
    (
        "project: Billing\njobs: []\n",
        [
            "proj.yaml:1: project: invalid project name 'Billing': use 1-63 lowercase letters, "
            "digits, '_', '-' or '.', starting with a letter or digit"
        ],
    ),
    (
        "project: p\ndefault: {}\njobs: []\n",
        ["proj.yaml:2: default: unknown key; did you mean 'defaults'?"],
    ),
    (
        "defaults:\n  timeout: forever\njobs:\n  - {name: a, start: 1s, noop: {}}\n"
        "  - {name: b, start: 1s, noop: {}}\n",
        [
            "proj.yaml:2: defaults.timeout: invalid duration 'forever': expected "
            "<number><unit>... with units ms, s, m, h, d, w (e.g. '90s', '1h30m') or ISO 8601 "
            "(e.g. 'PT90S')"
        ],
    ),
    ("project: p\n", ["proj.yaml:1: jobs: required"]),
    ("jobs: {a: 1}\n", ["proj.yaml:1: jobs: expected a list, got a mapping"]),
    ("- 1\n- 2\n", ["proj.yaml:1: expected a mapping (key: value), got a list"]),
    ("jobs: [1]\n", ["proj.yaml:1: job #1: expected a mapping (key: value), got 1"]),
    ("", ["proj.yaml:1: empty file; a config file needs at least `jobs:`"]),
    (
        "# nothing\n",
        ["proj.yaml:1: empty file (only comments); a config file needs at least `jobs:`"],
    ),
    (
        "jobs:\n  - name: a\n    schedule: */5 * * * *\n",
        [
            "proj.yaml:3: YAML syntax error: expected alphabetic or numeric character, but "
            "found '/' (quote cron expressions: schedule: \"*/5 * * * *\")"
        ],
    ),
    (
        "jobs: [\n",
        ["proj.yaml:2: YAML syntax error: expected the node content, but found '<stream end>'"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_YAML)
def test_bad_yaml_problem_lines(tmp_path: Path, text: str, expected: list[str]) -> None:
    assert problems(tmp_path, text) == expected


def test_many_problems_in_one_file_are_all_reported(tmp_path: Path) -> None:
    text = """\
project: p
jobs:
  - name: a
    schedule: "@daily"
    timeout: -5s
    misfire: later
    noop: {}
    http: {url: "gopher://x"}
  - name: b
    start: 1s
    until: 0s
    noop: {sleep: x}
"""
    assert problems(tmp_path, text) == [
        "proj.yaml:5: job a: timeout: invalid duration '-5s': expected <number><unit>... with "
        "units ms, s, m, h, d, w (e.g. '90s', '1h30m') or ISO 8601 (e.g. 'PT90S')",
        "proj.yaml:6: job a: misfire: expected 'coalesce', 'skip' or 'catch_up', got 'later'",
        "proj.yaml:8: job a: http.url: expected an http:// or https:// URL, got 'gopher://x'",
        "proj.yaml:8: job a: http: a job has exactly one target, and this one has noop",
        "proj.yaml:11: job b: until: a duration after start must be longer than 0s",
        "proj.yaml:12: job b: noop.sleep: invalid duration 'x': expected <number><unit>... with "
        "units ms, s, m, h, d, w (e.g. '90s', '1h30m') or ISO 8601 (e.g. 'PT90S')",
    ]


def test_payload_size_is_bounded(tmp_path: Path) -> None:
    text = "jobs:\n  - name: a\n    start: 1s\n    noop: {}\n    payload: 'PAYLOAD'\n"
    big = text.replace("PAYLOAD", "x" * 70_000)
    assert problems(tmp_path, big) == [
        "proj.yaml:5: job a: payload: payload, metadata, args, kwargs and body take 70004 "
        "bytes as JSON; at most 65536 are allowed"
    ]
    small = text.replace("PAYLOAD", "x" * 200)
    assert problems(tmp_path, small) == []
    assert problems(tmp_path, small, max_payload_bytes=100) == [
        "proj.yaml:5: job a: payload: payload, metadata, args, kwargs and body take 204 "
        "bytes as JSON; at most 100 are allowed"
    ]


def test_toml_problem_lines(tmp_path: Path) -> None:
    text = """\
project = "p"

[defaults]
timezone = "Nowhere/Land"

[[jobs]]
name = "a"
schedule = "@daily"
noop = {}

[[jobs]]
name = "b"
schedule = "@daily"
repeats = 0
start = 2027-01-01T00:00:00

[jobs.rq]
queue = "q"
func = "x"
"""
    assert problems(tmp_path, text, "p.toml") == [
        "p.toml:4: defaults.timezone: unknown time zone 'Nowhere/Land' (expected an IANA name "
        "such as 'America/New_York')",
        "p.toml:14: job b: repeats: expected a whole number greater than 0, got 0",
        "p.toml:15: job b: start: time 2027-01-01T00:00:00 has no UTC offset; add one, e.g. "
        "'Z' or '+01:00'",
        "p.toml:19: job b: rq.func: expected a dotted path to a function such as "
        "'billing.reports.nightly', got 'x'",
    ]


def test_toml_syntax_error_has_its_line(tmp_path: Path) -> None:
    text = 'project = "p"\n[[jobs]]\nname = "a"\nname = "b"\n'
    assert problems(tmp_path, text, "p.toml") == [
        "p.toml:4: TOML syntax error: Cannot overwrite a value"
    ]


def test_file_problems(tmp_path: Path) -> None:
    (tmp_path / "binary.yaml").write_bytes(b"\x00\x01jobs")
    (tmp_path / "latin1.yaml").write_bytes(b"jobs: []\n# caf\xe9\n")
    (tmp_path / "notes.txt").write_text("jobs: []\n")
    (tmp_path / "Bad Name.yaml").write_text("jobs: []\n")
    names = ["missing.yaml", "binary.yaml", "latin1.yaml", "notes.txt", "Bad Name.yaml", "."]
    result = load_paths([tmp_path / name for name in names])
    assert [str(problem).replace(f"{tmp_path}/", "") for problem in result.problems] == [
        "missing.yaml: no such file",
        "binary.yaml: binary file, not YAML or TOML text",
        "latin1.yaml:2: not UTF-8 text (byte 0xe9)",
        "notes.txt: not a config file: expected .yaml, .yml, .toml",
        "Bad Name.yaml:1: project: no `project:` given, and the file name 'Bad Name' is not a "
        "project name (lowercase letters, digits, '_', '-', '.'); add `project: NAME`",
        f"{tmp_path}: is a directory; give the config files in it",
    ]


def test_same_project_in_two_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("project: p\njobs: []\n")
    (tmp_path / "b.yaml").write_text("# other\nproject: p\njobs: []\n")
    result = load_paths([tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "a.yaml"])
    assert [str(problem) for problem in result.problems] == [
        f"{tmp_path}/b.yaml:2: project: project 'p' is also defined in {tmp_path}/a.yaml"
    ]
    assert [project.file for project in result.projects] == [str(tmp_path / "a.yaml")]


def test_problem_json_form(tmp_path: Path) -> None:
    result = load_text(tmp_path, "jobs:\n  - {name: a, start: 1s, noop: {sleep: x}}\n")
    (problem,) = result.problems
    assert problem.as_dict() == {
        "file": str(tmp_path / "proj.yaml"),
        "line": 2,
        "job": "a",
        "field": "noop.sleep",
        "message": problem.message,
        "text": str(problem),
    }


# --- warnings -------------------------------------------------------------------------------------


def test_warnings(tmp_path: Path) -> None:
    text = """\
jobs:
  - name: never
    schedule: "0 0 31 2 *"
    noop: {}
  - name: past
    schedule: "0 0 0 1 1 * 2020"
    noop: {}
  - name: late
    schedule: "@daily"
    until: "2026-05-01T00:00:00Z"
    noop: {}
  - name: knobs
    schedule: triggered
    max_pending: 3
    max_catch_up: 5
    http: {url: "http://x", timeout: 10m}
"""
    assert warnings(tmp_path, text) == [
        "proj.yaml:3: job never: schedule: never fires",
        "proj.yaml:6: job past: schedule: never fires",
        "proj.yaml:9: job late: schedule: never fires: its first time "
        "2026-06-01T00:00:00+00:00 is after until (2026-05-01T00:00:00Z)",
        "proj.yaml:14: job knobs: max_pending: has no effect without overlap: queue",
        "proj.yaml:15: job knobs: max_catch_up: has no effect without misfire: catch_up",
        "proj.yaml:16: job knobs: http.timeout: longer than the job's timeout, which ends "
        "the invocation",
    ]


def test_inherited_settings_do_not_warn_and_empty_jobs_does(tmp_path: Path) -> None:
    text = "defaults: {max_pending: 3}\njobs:\n  - {name: a, schedule: '@daily', noop: {}}\n"
    assert warnings(tmp_path, text) == []
    assert warnings(tmp_path, "jobs: []\n") == [
        "proj.yaml:1: jobs: no jobs: applying this file removes every job of the project"
    ]


# --- YAML features and abuse ----------------------------------------------------------------------


def test_yaml_anchors_and_merge_keys(tmp_path: Path) -> None:
    text = """\
jobs:
  - name: a
    schedule: "@daily"
    rq: &target {func: app.run, queue: q}
  - name: b
    schedule: "@daily"
    rq: {<<: *target, func: app.other}
"""
    a, b = load_text(tmp_path, text).projects[0].jobs
    assert a.rq == RqTarget(func="app.run", queue="q")
    assert b.rq == RqTarget(func="app.other", queue="q")


def test_yaml_alias_bomb_and_deep_nesting_are_refused(tmp_path: Path) -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        name, previous = chr(ord("a") + level), chr(ord("a") + level - 1)
        levels.append(f"{name}: &{name} [{', '.join(['*' + previous] * 10)}]")
    bomb = "\n".join(levels) + "\njobs: []\n"
    assert problems(tmp_path, bomb) == [
        "proj.yaml:1: more than 200000 values (after expanding aliases)"
    ]
    assert problems(tmp_path, "jobs: " + "[" * 3000 + "]" * 3000 + "\n") == [
        "proj.yaml:1: nested deeper than 64 levels"
    ]
    assert problems(tmp_path, "jobs: &a [*a]\n") == ["proj.yaml:1: nested deeper than 64 levels"]


def test_huge_numbers_are_problems_not_crashes(tmp_path: Path) -> None:
    text = "jobs:\n  - {name: b, start: 1s, timeout: 1.0e+20, noop: {}}\n"
    assert problems(tmp_path, text) == [
        "proj.yaml:2: job b: timeout: invalid duration 1e+20: longer than 100 years"
    ]
    text = "jobs:\n  - {name: a, start: 1.0e+20, noop: {}}\n"
    assert problems(tmp_path, text) == [
        "proj.yaml:2: job a: start: expected from 0 to 100 years in seconds, got 1e+20"
    ]


def test_yaml_keys_stay_text(tmp_path: Path) -> None:
    text = "jobs:\n  - name: a\n    start: 1s\n    noop: {}\n    metadata: {no: 'yes', 1: one}\n"
    (job,) = load_text(tmp_path, text).projects[0].jobs
    assert job.metadata == {"no": "yes", "1": "one"}


# --- small parts ----------------------------------------------------------------------------------


def test_rfc3339() -> None:
    assert parse_rfc3339("2026-12-01T09:00:00Z") == datetime(2026, 12, 1, 9, tzinfo=timezone.utc)
    parsed = parse_rfc3339("2026-12-01t09:00:00.5-02:30")
    assert parsed.utcoffset() == -timedelta(hours=2, minutes=30)
    assert parsed.microsecond == 500_000
    for bad in (
        "2026-12-01T09:00:00",
        "2026-13-01T09:00:00Z",
        "2026-12-01",
        "2026-12-01T09:00:00+24:00",
    ):
        with pytest.raises(ValueError):
            parse_rfc3339(bad)


def test_time_point() -> None:
    relative = TimePoint.parse("PT90S")
    assert relative.resolve(NOW) == NOW + timedelta(seconds=90) and str(relative) == "1m30s"
    absolute = TimePoint.parse(datetime(2027, 1, 1, tzinfo=timezone.utc))
    assert absolute.resolve(NOW) == datetime(2027, 1, 1, tzinfo=timezone.utc)
    assert str(absolute) == "2027-01-01T00:00:00Z"
    for bad in (True, -1, "soon", datetime(2027, 1, 1), [1]):
        with pytest.raises(ValueError):
            TimePoint.parse(bad)


def test_schema_of_every_job_field_has_a_description() -> None:
    schema = ConfigFile.model_json_schema()
    job = schema["$defs"]["JobSpec"]["properties"]
    assert {"name", "schedule", "start", "until", "rq", "http", "noop", "failure_policy"} <= set(
        job
    )
    assert all(spec.get("description") for spec in job.values())


# --- nothing raises -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["name", "schedule", "start", "until", "timeout", "noop", "rq", "func", "x"]
            )
            | st.text(max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300))
def test_random_text_never_raises(tmp_path: Path, text: str) -> None:
    for name in ("fuzz.yaml", "fuzz.toml"):
        result = load_text(tmp_path, text, name)
        assert result.ok or all(str(problem) for problem in result.problems)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(jobs=st.lists(json_values, max_size=3), defaults=json_values)
def test_random_structures_never_raise(
    tmp_path: Path, jobs: list[object], defaults: object
) -> None:
    text = yaml.safe_dump({"defaults": defaults, "jobs": jobs})
    result = load_text(tmp_path, text)
    assert result.ok or all(problem.line for problem in result.problems)
    json.dumps([problem.as_dict() for problem in result.problems])
