"""The pure job state machine (DESIGN §2): no I/O, no Redis, no clock reads.

`step(state, event, world)` returns the new state and the actions to commit with it.
"""

from cronq.statemachine.actions import (
    AbortInvocation,
    Action,
    Finish,
    RecordInvocation,
    RecordOverrun,
    RecordSkip,
    Rejected,
    Repair,
    StartInvocation,
    TickLater,
    WatchdogReport,
)
from cronq.statemachine.events import (
    Abort,
    Disable,
    Enable,
    Event,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    Pause,
    Resume,
    SpecChanged,
    TimerTick,
    TriggerNow,
    WatchdogFired,
)
from cronq.statemachine.machine import step
from cronq.statemachine.model import (
    Deferred,
    Invocation,
    InvocationStatus,
    JobState,
    JobStateName,
    PendingStart,
    Phase,
    Tick,
)
from cronq.statemachine.world import JobRules, World

__all__ = [
    "Abort",
    "AbortInvocation",
    "Action",
    "Deferred",
    "Disable",
    "Enable",
    "Event",
    "Finish",
    "Invocation",
    "InvocationDone",
    "InvocationStarted",
    "InvocationStarting",
    "InvocationStatus",
    "JobRules",
    "JobState",
    "JobStateName",
    "Pause",
    "PendingStart",
    "Phase",
    "RecordInvocation",
    "RecordOverrun",
    "RecordSkip",
    "Rejected",
    "Repair",
    "Resume",
    "SpecChanged",
    "StartInvocation",
    "Tick",
    "TickLater",
    "TimerTick",
    "TriggerNow",
    "WatchdogFired",
    "WatchdogReport",
    "World",
    "step",
]
