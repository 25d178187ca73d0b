"""`cronq.Client` against a real Redis server, with real `cronq worker` processes where the
behaviour needs one: every call, and its error paths."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

import cronq
from cronq import Client, ConfigError, JobExists, JobRefused, UnknownJob
from cronq.statemachine import InvocationStatus, JobStateName
from cronq.store import load_job
from tests.engine_harness import Cronq, wait_until, worker

EVERY_HOUR = {"schedule": "@every 1h", "noop": {}}


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as made:
        yield made


def tick_nonce(client: Client, job_id: str) -> int | None:
    job = load_job(client.connection, client.keys, job_id)
    assert job is not None
    return job.state.tick.nonce if job.state.tick else None


def test_add_get_list_and_replace(client: Client) -> None:
    info = client.add("api/hourly", EVERY_HOUR)
    assert (info.id, info.project, info.name, info.origin) == ("api/hourly", "api", "hourly", "api")
    assert info.state is JobStateName.SCHEDULED and info.next_run is not None
    assert info.as_dict()["schedule"] == "@every 1h"
    spec = cronq.JobSpec.model_validate({"name": "manual", "schedule": "triggered", "noop": {}})
    client.add("api/manual", spec)
    assert [j.id for j in client.list()] == ["api/hourly", "api/manual"]
    assert [j.id for j in client.list("api")] == ["api/hourly", "api/manual"]
    assert client.list("other") == []

    nonce = tick_nonce(client, "api/hourly")
    replaced = client.add("api/hourly", {**EVERY_HOUR, "timeout": "1m"})
    assert replaced.spec.timeout == timedelta(minutes=1)
    assert tick_nonce(client, "api/hourly") == nonce  # same timing: the armed tick is kept
    client.add("api/hourly", {"schedule": "@every 2h", "noop": {}})
    assert tick_nonce(client, "api/hourly") != nonce

    with pytest.raises(JobExists, match="api/manual"):
        client.add("api/manual", EVERY_HOUR, overwrite=False)
    assert client.get("api/manual").schedule == "triggered"


@pytest.mark.parametrize(
    ("job_id", "spec", "where"),
    [
        ("api/bad", {"schedule": "61 * * * *", "noop": {}}, "job bad: schedule: minute: 61"),
        ("api/bad", {"schedule": "@daily"}, "job bad: needs a target"),
        ("api/bad", {**EVERY_HOUR, "name": "other"}, "named 'other'"),
        ("no-slash", EVERY_HOUR, "job_id: expected a job id project/name"),
        ("Upper/x", EVERY_HOUR, "project: invalid project name 'Upper'"),
    ],
)
def test_an_invalid_job_raises_config_error_and_writes_nothing(
    client: Client, job_id: str, spec: dict[str, object], where: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        client.add(job_id, spec)
    assert where in str(raised.value) and raised.value.problems
    assert client.connection.keys("*") == []


def test_every_call_on_an_unknown_job_raises_unknown_job(client: Client) -> None:
    calls = [
        client.get,
        client.delete,
        client.trigger,
        client.pause,
        client.resume,
        client.abort,
        client.history,
    ]
    for call in calls:
        with pytest.raises(UnknownJob, match="api/nope"):
            call("api/nope")


def test_a_connection_that_decodes_responses_is_refused(redis_url: str) -> None:
    with pytest.raises(ValueError, match="decode_responses"):
        Client(redis.Redis.from_url(redis_url, decode_responses=True))


def test_trigger_while_busy_is_refused_and_abort_ends_the_run(
    client: Client, harness: Cronq
) -> None:
    client.add("api/slow", {"schedule": "triggered", "noop": {"sleep": "3s"}, "overlap": "skip"})
    with pytest.raises(JobRefused, match="nothing is running"):
        client.abort("api/slow")
    with worker(harness):
        assert client.trigger("api/slow").state is JobStateName.QUEUED
        wait_until(lambda: client.get("api/slow").state is JobStateName.RUNNING, timeout=10)
        with pytest.raises(JobRefused, match="busy"):
            client.trigger("api/slow")
        assert client.abort("api/slow").state is JobStateName.SCHEDULED
        (run,) = client.history("api/slow")
        assert run.status is InvocationStatus.ABORTED and run.manual
        assert run.duration is not None and run.lag is not None
        with pytest.raises(JobRefused, match="nothing is running"):
            client.abort("api/slow")


def test_pause_stops_the_ticks_and_resume_continues_from_now(
    client: Client, harness: Cronq
) -> None:
    client.add("api/every", {"schedule": "* * * * * *", "noop": {}})

    def scheduled(since: datetime) -> list[cronq.Invocation]:
        runs = client.history("api/every", 100)
        return [r for r in runs if r.scheduled_for and r.scheduled_for > since]

    with worker(harness):
        wait_until(lambda: client.history("api/every"), timeout=10, what="a first run")
        paused = client.pause("api/every", reason="maintenance")
        paused_at = datetime.now(timezone.utc)  # after the pause committed: a tick before it ran
        assert paused.state is JobStateName.SUSPENDED and paused.next_run is None
        assert paused.paused_reason == "maintenance"
        time.sleep(2.5)  # two tick boundaries pass
        assert scheduled(paused_at) == []
        resumed_at = datetime.now(timezone.utc)
        resumed = client.resume("api/every")
        assert resumed.next_run is not None and resumed.next_run > resumed_at
        wait_until(lambda: scheduled(resumed_at), timeout=5, what="a run after resume")
        time.sleep(1)
        until = datetime.now(timezone.utc)  # the history shows runs in flight: let these end
        runs = wait_until(
            lambda: ended(scheduled(paused_at), until), timeout=5, what="the runs to end"
        )
    # Nothing missed while paused ran afterwards: every run belongs to a tick after the resume.
    assert all(r.scheduled_for and r.scheduled_for > resumed_at for r in runs)
    assert [r.status for r in runs] == [InvocationStatus.SUCCEEDED] * len(runs)
    assert len(runs) <= 3


def ended(runs: list[cronq.Invocation], until: datetime) -> list[cronq.Invocation] | None:
    """The runs scheduled up to `until` once every one has an outcome, else None."""
    due = [r for r in runs if r.scheduled_for and r.scheduled_for <= until]
    return due if due and all(r.status.final for r in due) else None


def test_delete_keeps_the_history_and_delete_prefix_counts(client: Client, harness: Cronq) -> None:
    client.add("api/once", {"schedule": "triggered", "noop": {}})
    with worker(harness):
        client.trigger("api/once")
        wait_until(lambda: client.history("api/once"), timeout=10, what="the run")
    assert client.delete("api/once").id == "api/once"
    with pytest.raises(UnknownJob):
        client.get("api/once")
    assert [r.status for r in client.history("api/once")] == [InvocationStatus.SUCCEEDED]
    assert client.list() == []

    for job_id in ("p1/a", "p1/b", "p10/c", "p2/a"):
        client.add(job_id, EVERY_HOUR)
    assert client.delete_prefix("p1/") == 2
    assert [j.id for j in client.list()] == ["p10/c", "p2/a"]
    with pytest.raises(ValueError, match="empty prefix"):
        client.delete_prefix("")


def test_apply_of_a_project_file_never_removes_its_api_jobs(client: Client, tmp_path: Path) -> None:
    client.add("proj/from-api", EVERY_HOUR)
    path = tmp_path / "proj.yaml"
    path.write_text("jobs: [{name: from-file, schedule: '@every 1h', noop: {}}]\n")
    (plan,) = client.apply([path])
    assert [str(c) for c in plan.changes] == ["+ proj/from-file"]
    path.write_text("jobs: []\n")
    (plan,) = client.apply(str(path))
    assert [str(c) for c in plan.changes] == ["- proj/from-file"]
    assert [j.id for j in client.list("proj")] == ["proj/from-api"]
    # A file that declares an API job takes it over; from then on the file owns it.
    path.write_text("jobs: [{name: from-api, schedule: '@every 1h', noop: {}}]\n")
    (plan,) = client.apply([path])
    assert [str(c) for c in plan.changes] == ["~ proj/from-api (origin)"]
    assert client.get("proj/from-api").origin == str(path)
    path.write_text("jobs: []\n")
    client.apply([path])
    assert client.list() == []


def test_apply_takes_module_names_and_reports_their_problems(client: Client) -> None:
    (plan,) = client.apply(["tests.decorated_jobs"], dry_run=True)
    assert [str(c) for c in plan.changes] == [
        "+ tests.decorated_jobs/every_second",
        "+ tests.decorated_jobs/on-demand",
    ]
    assert not plan.applied and client.list() == []
    with pytest.raises(ConfigError, match=r"tests\.bad_decorated_jobs\.needs_customer") as raised:
        client.apply(["tests.decorated_jobs", "tests.bad_decorated_jobs"])
    assert len(raised.value.problems) == 2
    assert client.list() == []
