"""Shared fixtures: real Redis-compatible servers on loopback for integration tests, and an
in-memory fakeredis for unit tests that only need Redis-shaped storage."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from itertools import count
from pathlib import Path

import fakeredis
import pytest
import redis

from cronq.redis_server import RedisServer
from tests.engine_harness import Cronq

MakeRedisServer = Callable[..., RedisServer]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real server for the session: a server per test would cost more than most tests."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server, emptied first, so every test starts from nothing (tests run one at a
    time)."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    return redis_server.url


@pytest.fixture
def make_redis_server(tmp_path: Path) -> Iterator[MakeRedisServer]:
    """Start extra servers, each in its own directory; all are stopped at teardown, whether the
    test passed or not, and even if stopping one of them fails."""
    numbers = count()
    with ExitStack() as stoppers:

        def make(
            *, appendonly: bool = False, password: str | None = None, port: int | None = None
        ) -> RedisServer:
            server = RedisServer(
                tmp_path / f"redis-{next(numbers)}",
                port=port,
                appendonly=appendonly,
                password=password,
            )
            stoppers.callback(server.stop)
            server.start()
            return server

        yield make


@pytest.fixture
def fake_redis() -> fakeredis.FakeRedis:
    """A fresh in-memory Redis with its own data, for tests that need no real server."""
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@pytest.fixture
def harness(redis_url: str, tmp_path: Path) -> Iterator[Cronq]:
    """The command line and real `cronq worker` processes on an emptied server; every worker is
    gone at teardown, even when the test fails."""
    cronq = Cronq(redis_url, tmp_path)
    try:
        yield cronq
    finally:
        cronq.stop_workers()
        cronq.kill_all()
