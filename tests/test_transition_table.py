"""The table of which transitions exist (docs/state-machine.md), checked against the machine.

Each row is a job in one state, built by driving the machine there; each column an event. A cell
is the state after the event and the actions it asked for; `·` is "nothing changes", `rejected`
an operator request refused. Regenerate with `python -m tests.test_transition_table`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from cronq.statemachine import (
    Abort,
    Disable,
    Enable,
    Event,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    InvocationStatus,
    Pause,
    Rejected,
    Resume,
    SpecChanged,
    TimerTick,
    TriggerNow,
    WatchdogFired,
)
from tests.machine_harness import Job, rules

DOC = Path(__file__).resolve().parent.parent / "docs" / "state-machine.md"
FAILING = {"constant": {"delay": "1s", "max_retries": 1}}


def disabled() -> Job:
    return Job(rules("@every 10s", failure=FAILING))


def scheduled() -> Job:
    job = disabled()
    job.enable()
    return job


def queued() -> Job:
    job = scheduled()
    job.tick()
    return job


def running() -> Job:
    job = queued()
    job.begin()
    return job


def overrun() -> Job:
    job = running()
    job.tick()
    return job


def suspended() -> Job:
    job = scheduled()
    job.send(Pause("x"))
    return job


def finished() -> Job:
    job = Job(rules(None, start=Job().now))
    job.enable()
    job.tick()
    job.run()
    return job


ROWS: dict[str, Callable[[], Job]] = {
    "DISABLED": disabled,
    "SCHEDULED": scheduled,
    "QUEUED": queued,
    "RUNNING": running,
    "OVERRUN": overrun,
    "SUSPENDED": suspended,
    "FINISHED": finished,
}


def _tick(job: Job) -> Event:
    if job.state.tick is None:
        return TimerTick(-1)
    job.at(max(job.now, job.state.tick.at))
    return TimerTick(job.state.tick.nonce)


def _starting(job: Job) -> Event:
    nonce = job.state.pending[0].nonce if job.state.pending else -1
    return InvocationStarting(nonce, "inv-new")


def _active_id(job: Job) -> str:
    return job.state.active[0].id if job.state.active else "inv-none"


def _respec(job: Job) -> Event:
    job.rules = rules("@every 1h", failure=FAILING)
    return SpecChanged()


def _watchdog(job: Job) -> Event:
    job.advance(3600)
    return WatchdogFired(timedelta(seconds=3))


COLUMNS: dict[str, Callable[[Job], Event]] = {
    "enable": lambda job: Enable(),
    "disable": lambda job: Disable(),
    "spec changed": _respec,
    "timer tick": _tick,
    "stale tick": lambda job: TimerTick(-1),
    "starting": _starting,
    "started": lambda job: InvocationStarted(_active_id(job)),
    "done ok": lambda job: InvocationDone(_active_id(job), InvocationStatus.SUCCEEDED),
    "done failed": lambda job: InvocationDone(_active_id(job), InvocationStatus.FAILED, "x"),
    "trigger": lambda job: TriggerNow(),
    "pause": lambda job: Pause("x"),
    "resume": lambda job: Resume(),
    "abort": lambda job: Abort(),
    "watchdog fired": _watchdog,
}

ABBREVIATIONS = {
    "TickLater": "tick",
    "StartInvocation": "start",
    "AbortInvocation": "abort",
    "RecordInvocation": "rec",
    "RecordOverrun": "overrun",
    "RecordSkip": "skip",
    "Finish": "finish",
    "WatchdogReport": "report",
}


def cell(row: Callable[[], Job], column: Callable[[Job], Event]) -> str:
    job = row()
    before = job.state
    actions = job.send(column(job))
    if any(isinstance(a, Rejected) for a in actions):
        return "rejected"
    if job.state == before and not actions:
        return "·"
    names = sorted({ABBREVIATIONS[type(a).__name__] for a in actions})
    return job.state.name.value + (f" ({', '.join(names)})" if names else "")


def table() -> str:
    header = "| state \\ event | " + " | ".join(COLUMNS) + " |"
    rule = "|" + "---|" * (len(COLUMNS) + 1)
    rows = [
        f"| **{name}** | " + " | ".join(cell(build, c) for c in COLUMNS.values()) + " |"
        for name, build in ROWS.items()
    ]
    return "\n".join([header, rule, *rows])


def documented_table() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- table -->\n(.*?)\n<!-- /table -->", text, re.S)
    assert match, f"{DOC} has no <!-- table --> section"
    return match.group(1).strip()


def test_the_documented_table_is_what_the_machine_does() -> None:
    assert documented_table() == table()


def test_every_state_and_event_of_the_design_has_a_cell() -> None:
    assert set(ROWS) == {
        "DISABLED",
        "SCHEDULED",
        "QUEUED",
        "RUNNING",
        "OVERRUN",
        "SUSPENDED",
        "FINISHED",
    }
    for name, build in ROWS.items():
        assert build().state.name.value == name


if __name__ == "__main__":
    print(table())
