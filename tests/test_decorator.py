"""`@cronq.job` and `cronq apply --module`: decorated functions become jobs of the project named
after their module, with `rq` targets a real worker runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import cronq
from cronq.decorators import MARK, JobMark, project_from_module
from tests import decorated_jobs
from tests.engine_harness import Cronq, wait_until, worker

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "tests.decorated_jobs"


def test_the_decorator_marks_the_function_and_returns_it_unchanged() -> None:
    def report(day: str = "today") -> str:
        return f"report for {day}"

    marked = cronq.job("@daily", name="daily-report", timezone="Europe/Berlin")(report)
    assert marked is report and marked() == "report for today"
    assert getattr(report, MARK) == JobMark(
        {"schedule": "@daily", "timezone": "Europe/Berlin"}, "daily-report", "default"
    )
    with pytest.raises(TypeError, match="with parentheses"):
        cronq.job(report)  # type: ignore[arg-type]


def test_a_module_becomes_a_project_of_rq_jobs() -> None:
    result = project_from_module(PROJECT)
    assert result.ok and not result.warnings
    (project,) = result.projects
    assert (project.name, project.file) == (PROJECT, f"module:{PROJECT}")
    targets = {job.name: (job.rq.func, job.rq.queue) for job in project.jobs if job.rq}
    assert targets == {  # `add`, imported from another module, is not a job of this one
        "every_second": (f"{PROJECT}.every_second", decorated_jobs.QUEUE),
        "on-demand": (f"{PROJECT}.on_demand", decorated_jobs.QUEUE),
    }
    assert project.jobs[0].metadata == {"team": "tests"}


def test_a_function_that_needs_arguments_fails_the_apply(harness: Cronq) -> None:
    config = harness.write_config("jobs: [{name: fine, schedule: '@hourly', noop: {}}]\n")
    result = harness.cli("apply", str(config), "--module", "tests.bad_decorated_jobs")
    assert result.exit_code == 1
    problems = result.stderr.splitlines()
    assert problems == [
        "tests/bad_decorated_jobs.py:14: job needs_customer: tests.bad_decorated_jobs."
        "needs_customer: cannot be called without arguments (no default for 'customer_id')",
        "tests/bad_decorated_jobs.py:19: job bad_minute: schedule: minute: 61 is out of range 0-59",
    ]
    assert harness.connection.keys("*") == []  # the valid file is not applied either


def test_a_module_that_cannot_be_imported_fails_clearly(harness: Cronq) -> None:
    result = harness.cli("apply", "--module", "tests.no_such_module")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "cannot import module 'tests.no_such_module': ModuleNotFoundError" in result.stderr
    assert harness.cli("apply").exit_code == 2  # neither paths nor modules: bad usage


def test_applied_functions_run_on_their_queue(
    harness: Cronq, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the worker imports tests.decorated_jobs
    config = harness.write_config("jobs: [{name: idle, schedule: triggered, noop: {}}]\n")
    plan = harness.cli_json("apply", str(config), "--module", PROJECT)
    assert [p["project"] for p in plan["projects"]] == ["proj", PROJECT]
    job_id = f"{PROJECT}/every_second"
    with worker(harness, decorated_jobs.QUEUE):
        wait_until(
            lambda: harness.runs(job_id, "SUCCEEDED"), timeout=15, what="a run of every_second"
        )
        harness.cli_json("trigger", f"{PROJECT}/on-demand")
        wait_until(lambda: harness.runs(f"{PROJECT}/on-demand", "SUCCEEDED"), timeout=10)
    again = harness.cli_json("apply", "--module", PROJECT)
    assert again["projects"][0]["changes"] == []  # applying the same module changes nothing


def test_the_decorator_example_is_valid() -> None:
    result = project_from_module("examples.decorated")
    assert result.ok, result.problems
    assert [job.name for job in result.projects[0].jobs] == ["cleanup", "report"]
