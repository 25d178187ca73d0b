"""Writes sent as one script call leave Redis exactly as redis-py's commands do, commit or drop
with the transaction they are sent in, and refuse what Redis would refuse half way through.
On fakeredis and on a real server (the script is Lua)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import fakeredis
import pytest
import redis
from redis.client import Pipeline

from cronq.writes import Writes

Client = redis.Redis


@pytest.fixture(params=["fakeredis", "server"])
def clients(request: pytest.FixtureRequest) -> Iterator[tuple[Client, Client]]:
    """Two empty databases of one kind: one written by redis-py's commands, one by Writes."""
    if request.param == "fakeredis":
        server = fakeredis.FakeServer()
        yield fakeredis.FakeRedis(server=server, db=0), fakeredis.FakeRedis(server=server, db=1)
        return
    url = request.getfixturevalue("redis_url")
    with Client.from_url(url, db=0) as first, Client.from_url(url, db=1) as second:
        yield first, second


BLOB = zlib.compress(b"\x00\xff binary \r\n with CRLF and NUL" * 3)


def every_command(target: Pipeline | Writes) -> None:
    """Each command Writes offers, with the argument types cronq passes (str, bytes, int,
    float, timedelta), on keys some of which exist already."""
    target.hset("h", mapping={"a": "1", "b": BLOB, b"c": 3, "d": 2.5})
    target.hset("h", mapping={"a": "replaced"})
    target.hdel("h", "d", "missing")
    target.hincrby("stats", "n", 2)
    target.hincrby("stats", "n", 3)
    target.sadd("s", "x", "y", b"z")
    target.srem("s", "y")
    target.zadd("z", {"m1": 1.5, "m2": 1_795_000_000.25, b"m3": 7})
    target.zrem("z", "m3")
    target.zadd("z", {"m4": 4})
    target.zremrangebyscore("z", "-inf", 1.5)
    target.lpush("l", "first", BLOB)
    target.rpush("l", "last", 12)
    target.ltrim("l", 0, 2)
    target.expire("l", timedelta(days=30))
    target.expire("h", 90)
    target.delete("gone", "also-gone")
    target.publish("channel", "tick")


def dump(client: Client) -> dict[bytes, tuple[bytes, Any, int]]:
    """Every key: its type, its value, its TTL in whole seconds."""
    readers: dict[bytes, Callable[[bytes], Any]] = {
        b"hash": client.hgetall,
        b"set": client.smembers,
        b"zset": lambda key: client.zrange(key, 0, -1, withscores=True),
        b"list": lambda key: client.lrange(key, 0, -1),
        b"string": client.get,
    }
    found = {}
    for key in client.scan_iter():
        kind = client.type(key)
        found[key] = (kind, readers[kind](key), client.ttl(key))
    return found


def test_writes_leave_what_the_same_commands_leave(clients: tuple[Client, Client]) -> None:
    by_commands, by_writes = clients
    by_commands.set("gone", "1")
    by_writes.set("gone", "1")
    with by_commands.pipeline() as pipe:
        every_command(pipe)
        pipe.execute()
    writes = Writes()
    every_command(writes)
    writes.send(by_writes)
    expected = dump(by_commands)
    assert expected[b"h"][1] == {b"a": b"replaced", b"b": BLOB, b"c": b"3"}
    assert dump(by_writes) == expected


def test_writes_sent_in_a_transaction_are_dropped_with_it(clients: tuple[Client, Client]) -> None:
    client, _ = clients
    writes = Writes()
    writes.hset("job", mapping={"state": "new"})
    writes.rpush("queue", "task")
    with client.pipeline() as pipe:
        pipe.watch("job")
        client.hset("job", mapping={"state": "theirs"})  # another writer gets in between
        pipe.multi()
        writes.send(pipe)
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert client.hgetall("job") == {b"state": b"theirs"} and not client.exists("queue")
    with client.pipeline() as pipe:  # and committed with it when nobody does
        pipe.watch("job")
        pipe.multi()
        writes.send(pipe)
        pipe.execute()
    assert client.hgetall("job") == {b"state": b"new"}
    assert client.lrange("queue", 0, -1) == [b"task"]


def test_a_batch_of_thousands_of_commands_goes_in_one_call(redis_url: str) -> None:
    """Against the real server's Lua (fakeredis's takes half a minute for this)."""
    client = Client.from_url(redis_url)
    writes = Writes()
    fields = {f"field-{i}": f"value-{i}" for i in range(40)}
    for i in range(3_000):
        writes.hset(f"rq:job:{i}", mapping=fields)
        writes.rpush("queue", i)
    writes.send(client)
    assert client.llen("queue") == 3_000
    assert client.hgetall("rq:job:2999")[b"field-39"] == b"value-39"


@pytest.mark.parametrize("command", ["hset", "zadd"])
def test_an_empty_mapping_is_refused_before_anything_is_sent(command: str) -> None:
    client = fakeredis.FakeRedis()
    writes = Writes()
    writes.rpush("queue", "task")
    with pytest.raises(ValueError, match=command.upper()):
        getattr(writes, command)("key", mapping={})
    writes.send(client)
    assert client.lrange("queue", 0, -1) == [b"task"]  # what came before is kept, and whole


def test_nothing_collected_sends_nothing() -> None:
    client = fakeredis.FakeRedis()
    calls: list[object] = []
    client.eval = lambda *args: calls.append(args)  # type: ignore[method-assign]
    writes = Writes()
    assert not writes
    writes.send(client)
    assert calls == []
