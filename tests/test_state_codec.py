"""The state codec: every field of every kind survives the round trip; defaults are left out."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from cronq.state_codec import decode_state, encode_state
from cronq.statemachine import Invocation, InvocationStatus, JobState, Phase, Tick
from cronq.statemachine.model import Deferred, PendingStart

T = datetime(2026, 3, 8, 6, 30, 0, 123_456, tzinfo=timezone.utc)
LATER = T + timedelta(seconds=90)

EVERY_FIELD = JobState(
    phase=Phase.ENABLED,
    tick=Tick(2**61 + 7, T),
    pending=(PendingStart(11, T, 2, LATER, LATER, manual=True),),
    active=(
        Invocation("20260308T063000-ab", 12, T, 1, T, T, LATER),
        Invocation("20260308T063001-cd", 13, T, 3, T, T, LATER, InvocationStatus.RUNNING, True),
    ),
    backlog=(Deferred(T), Deferred(LATER, manual=True, behind=True)),
    anchor=T,
    timing="* * * * * *|UTC",
    triggers=41,
    overruns=2,
    paused_reason="maintenance",
    finished_reason=None,
    checked_at=LATER,
)


def test_every_field_survives_the_round_trip() -> None:
    assert decode_state(encode_state(EVERY_FIELD)) == EVERY_FIELD
    assert decode_state(encode_state(JobState())) == JobState()


def test_the_encoding_leaves_defaults_out_and_keeps_times_as_epoch_seconds() -> None:
    assert encode_state(JobState()) == "{}"
    idle = JobState(phase=Phase.ENABLED, tick=Tick(5, T), timing="x")
    assert json.loads(encode_state(idle)) == {
        "phase": "ENABLED",
        "tick": {"nonce": 5, "at": T.timestamp()},
        "timing": "x",
    }
    assert json.loads(encode_state(EVERY_FIELD))["backlog"] == [
        {"scheduled_for": T.timestamp()},
        {"scheduled_for": LATER.timestamp(), "manual": True, "behind": True},
    ]


def test_an_empty_or_missing_state_is_the_initial_state() -> None:
    assert decode_state(None) == decode_state(b"") == JobState()
