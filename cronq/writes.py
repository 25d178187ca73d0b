"""The writes of one transaction, sent to Redis as one script call.

A step writes about six commands per job (state, watchdog index, next tick, the users' RQ job)
and an outcome five (state, index, history). Queued in a MULTI, each command costs the client
some 10 µs to add, pack, send and read back twice (QUEUED, then in EXEC's reply), about a tenth of
a trigger's CPU. Carried as the arguments of one EVAL instead, a whole batch costs about as much
as two commands. Redis runs the script at once and whole, like EXEC; sent inside a MULTI after
WATCH, it is committed or dropped with the rest of the transaction, as the commands were.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from redis import Redis
from redis.client import Pipeline
from redis.typing import EncodableT, FieldT, KeyT

__all__ = ["Writes"]

# ARGV is a run of commands, each its argument count followed by the command and its arguments.
# One command's arguments must fit Lua's stack for unpack() (some 8,000; cronq's have at most
# about 50). The keys are not declared in KEYS: one server holds them all, as RQ requires too.
_RUN = """
local i = 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
"""


class Writes:
    """Collects write commands under the names and arguments of redis-py's, for `send`."""

    def __init__(self) -> None:
        self.args: list[EncodableT] = []

    def __bool__(self) -> bool:
        return bool(self.args)

    def send(self, client: Redis | Pipeline) -> None:
        """Run the writes collected (through a pipeline: queue them, inside its MULTI)."""
        if self.args:
            client.eval(_RUN, 0, *self.args)

    def commit_in(self, pipe: Pipeline) -> None:
        """End the reads of a WATCHing pipeline: its MULTI, with the writes in it; the caller's
        EXEC commits them unless a watched key changed."""
        pipe.multi()
        self.send(pipe)

    def _command(self, *args: EncodableT) -> None:
        self.args.append(len(args))
        self.args.extend(args)

    def hset(self, name: KeyT, mapping: Mapping[FieldT, EncodableT]) -> None:
        _require(mapping, "HSET")
        args: list[EncodableT] = [2 + 2 * len(mapping), "HSET", name]
        for pair in mapping.items():
            args.extend(pair)
        self.args.extend(args)

    def hdel(self, name: KeyT, *fields: FieldT) -> None:
        self._command("HDEL", name, *fields)

    def hincrby(self, name: KeyT, key: FieldT, amount: int) -> None:
        self._command("HINCRBY", name, key, amount)

    def delete(self, *names: KeyT) -> None:
        self._command("DEL", *names)

    def expire(self, name: KeyT, time: int | timedelta) -> None:
        seconds = int(time.total_seconds()) if isinstance(time, timedelta) else time
        self._command("EXPIRE", name, seconds)

    def sadd(self, name: KeyT, *values: FieldT) -> None:
        self._command("SADD", name, *values)

    def srem(self, name: KeyT, *values: FieldT) -> None:
        self._command("SREM", name, *values)

    def zadd(self, name: KeyT, mapping: Mapping[EncodableT, float]) -> None:
        _require(mapping, "ZADD")
        args: list[EncodableT] = [2 + 2 * len(mapping), "ZADD", name]
        for member, score in mapping.items():
            args += (score, member)
        self.args.extend(args)

    def zrem(self, name: KeyT, *values: FieldT) -> None:
        self._command("ZREM", name, *values)

    def zremrangebyscore(self, name: KeyT, min: float | str, max: float | str) -> None:
        self._command("ZREMRANGEBYSCORE", name, min, max)

    def lpush(self, name: KeyT, *values: EncodableT) -> None:
        self._command("LPUSH", name, *values)

    def rpush(self, name: KeyT, *values: EncodableT) -> None:
        self._command("RPUSH", name, *values)

    def ltrim(self, name: KeyT, start: int, end: int) -> None:
        self._command("LTRIM", name, start, end)

    def publish(self, channel: KeyT, message: EncodableT) -> None:
        self._command("PUBLISH", channel, message)


def _require(mapping: Mapping[EncodableT, object], command: str) -> None:
    """Refused here, as redis-py does: in the script, Redis's error would come after the writes
    before it had been made."""
    if not mapping:
        raise ValueError(f"{command} with nothing to set")
