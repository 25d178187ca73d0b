"""The operator commands (`trigger`, `pause`, `resume`, `abort`, `delete`) and the readable
`jobs` / `show` / `history`, through the command line against a real Redis server and a real
worker: exit statuses, messages, `--json`, and plain output when piped."""

from __future__ import annotations

import io
import json
import re
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from cronq import Client
from cronq.cli import jobs_cmd
from cronq.cli.jobs_cmd import span, when
from tests.engine_harness import Cronq, wait_until, worker

SLOW = """
project: ops
jobs:
  - {name: slow, schedule: triggered, noop: {sleep: 3s}, overlap: skip}
  - {name: hourly, schedule: "0 * * * *", timezone: Europe/Berlin, noop: {}}
"""


def fails(harness: Cronq, *args: str) -> str:
    """Run a command that must fail with exit 1 and a message, never a traceback."""
    result = harness.cli(*args)  # an uncaught exception would propagate here
    assert result.exit_code == 1, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    return result.stderr


def ok(harness: Cronq, *args: str) -> str:
    result = harness.cli(*args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_every_operator_command_on_an_unknown_job_exits_1(harness: Cronq) -> None:
    for command in ("trigger", "pause", "resume", "abort", "delete", "show", "history"):
        assert "no job 'ops/nope'" in fails(harness, command, "ops/nope")


def test_trigger_abort_and_their_refusals(harness: Cronq) -> None:
    harness.apply(SLOW)
    assert "refused: nothing is running" in fails(harness, "abort", "ops/slow")
    with worker(harness):
        triggered = harness.cli_json("trigger", "ops/slow")
        assert (triggered["id"], triggered["state"]) == ("ops/slow", "QUEUED")
        wait_until(lambda: harness.show("ops/slow")["state"] == "RUNNING", timeout=10)
        message = fails(harness, "trigger", "ops/slow")
        assert "refused: the job is busy (RUNNING) and overlap=skip forbids another run" in message
        assert ok(harness, "abort", "ops/slow").startswith("aborted ops/slow: SCHEDULED")
        assert [e["status"] for e in harness.history("ops/slow")] == ["ABORTED"]
        assert "nothing is running" in fails(harness, "abort", "ops/slow")


def test_pause_resume_and_delete(harness: Cronq) -> None:
    harness.apply(SLOW)
    paused = harness.cli_json("pause", "ops/hourly", "--reason", "db migration")
    assert (paused["state"], paused["paused_reason"], paused["next_run"]) == (
        "SUSPENDED",
        "db migration",
        None,
    )
    assert "db migration" in ok(harness, "jobs")
    assert "not paused" in fails(harness, "resume", "ops/slow")
    before = datetime.now(timezone.utc)
    text = ok(harness, "resume", "ops/hourly")
    assert re.match(r"resumed ops/hourly: SCHEDULED, next run in [\dhms ]+ \(\d{4}-", text), text
    next_run = datetime.fromisoformat(harness.show("ops/hourly")["next_run"])
    assert before < next_run <= before + timedelta(hours=1)

    deleted = harness.cli_json("delete", "ops/hourly")
    assert deleted["deleted"] is True and deleted["id"] == "ops/hourly"
    assert [row["id"] for row in harness.jobs()] == ["ops/slow"]


def test_history_of_a_deleted_job_is_kept(harness: Cronq) -> None:
    harness.apply(SLOW)
    Client(harness.connection).add("ops/quick", {"schedule": "triggered", "noop": {}})
    with worker(harness):
        ok(harness, "trigger", "ops/quick")
        wait_until(lambda: harness.stored_history("ops/quick"), timeout=10, what="the run")
    assert ok(harness, "delete", "ops/quick").startswith("deleted ops/quick")
    assert [e["status"] for e in harness.history("ops/quick")] == ["SUCCEEDED"]
    assert "SUCCEEDED" in ok(harness, "history", "ops/quick")
    assert ok(harness, "history", "ops/slow") == "no invocations of ops/slow yet\n"


def test_readable_jobs_show_and_history(harness: Cronq) -> None:
    harness.apply(SLOW)
    harness.cli_json("pause", "ops/slow", "--reason", "later")
    lines = ok(harness, "jobs").splitlines()
    assert lines[0].split() == ["ID", "STATE", "SCHEDULE", "ZONE", "NEXT", "RUN", "LAST", "PAUSED"]
    hourly = next(line for line in lines if line.startswith("ops/hourly"))
    assert re.search(r"in \d+m \d+s \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", hourly), hourly
    assert "Europe/Berlin" in hourly
    slow = next(line for line in lines if line.startswith("ops/slow"))
    column = lines[0].index("SCHEDULE")
    assert hourly.index("0 * * * *") == slow.index("triggered") == column  # aligned
    assert "\x1b[" not in "".join(lines)

    page = ok(harness, "show", "ops/hourly")
    assert page.startswith("ops/hourly  SCHEDULED\n")
    assert re.search(r"^  next run +in ", page, re.M) and "spec:\n" in page
    assert "  schedule: 0 * * * *\n" in page and re.search(r"^  origin +\S+proj\.yaml$", page, re.M)

    entry = {
        "id": "i1",
        "job": "ops/slow",
        "scheduled_for": "2027-01-04T09:00:00+00:00",
        "started_at": "2027-01-04T09:00:01.500000+00:00",
        "finished_at": "2027-01-04T09:02:13.500000+00:00",
        "status": "FAILED",
        "attempt": 2,
        "error": "boom\nsecond line",
    }
    harness.connection.lpush(harness.keys.history("ops/slow"), json.dumps(entry))
    header, row = ok(harness, "history", "ops/slow").splitlines()
    assert header.split()[:6] == ["ID", "STATUS", "SCHEDULED", "FOR", "DURATION", "LAG"]
    when_scheduled = ["2027-01-04", "09:00:00", "UTC"]
    assert row.split() == ["i1", "FAILED", *when_scheduled, "2m", "12s", "1.50s", "2", "boom"]
    assert harness.cli_json("history", "ops/slow") == [entry]  # --json keeps its shape


def test_colors_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert jobs_cmd._painted("FAILED", "FAILED") == "FAILED"  # pytest's capture is no terminal
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert jobs_cmd._painted("FAILED", "FAILED") == "\x1b[31mFAILED\x1b[0m"
    assert jobs_cmd._painted("ops/x", None) == "ops/x"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "0.25s"), (42, "42s"), (192, "3m 12s"), (7500, "2h 5m"), (273600, "3d 4h")],
)
def test_span_reads_like_a_person_would_say_it(seconds: float, text: str) -> None:
    assert span(timedelta(seconds=seconds)) == text
    assert span(timedelta(seconds=-seconds)) == "-" + text


def test_when_gives_relative_and_absolute_time() -> None:
    now = datetime(2026, 11, 21, 13, 44, 18, tzinfo=timezone.utc)
    at: Any = "2026-11-21T14:45:00+01:00"
    assert when(at, now) == "in 42s (2026-11-21 13:45:00 UTC)"
    assert when(now - timedelta(seconds=90), now) == "1m 30s ago (2026-11-21 13:42:48 UTC)"
    assert when(None, now) == "-"
