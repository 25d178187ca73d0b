"""The real server that integration tests and `cronq run` rely on: it starts, keeps its data
across restarts and crashes, guards itself with a password, stops only what it started, and RQ
works against it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from rq import Queue, SimpleWorker

from cronq.redis_server import SERVER_ENV_VAR, RedisServer, RedisServerError, find_server_binary
from tests.conftest import MakeRedisServer


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_starts_and_answers(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.ping()
        client.set("greeting", "hello")
        assert client.get("greeting") == b"hello"


def test_redis_url_starts_empty(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0


def test_password_refuses_strangers_and_admits_the_url(make_redis_server: MakeRedisServer) -> None:
    password = 's3cret :@/"\\ é'
    server = make_redis_server(password=password)
    for wrong in (None, "wrong"):
        # Without retries: redis-py retries authentication errors for seconds by default.
        with (
            redis.Redis(port=server.port, password=wrong, retry=Retry(NoBackoff(), 0)) as stranger,
            pytest.raises(redis.AuthenticationError),
        ):
            stranger.ping()
    with redis.Redis.from_url(server.url) as client:
        assert client.ping()


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_password_is_not_on_the_command_line(make_redis_server: MakeRedisServer) -> None:
    server = make_redis_server(password="not-for-ps")
    command_line = Path(f"/proc/{server.pid}/cmdline").read_bytes()
    assert b"not-for-ps" not in command_line


def test_appendonly_data_survives_stop_and_start(make_redis_server: MakeRedisServer) -> None:
    server = make_redis_server(appendonly=True)
    with redis.Redis.from_url(server.url) as client:
        client.set("kept", "yes")
    server.stop()
    assert not server.running
    server.start()
    with redis.Redis.from_url(server.url) as client:
        assert client.get("kept") == b"yes"


def test_comes_back_after_kill(make_redis_server: MakeRedisServer) -> None:
    server = make_redis_server(appendonly=True)
    with redis.Redis.from_url(server.url) as client:
        client.set("acknowledged", "1")
    pid = server.pid
    assert pid is not None
    server.kill()
    assert not pid_exists(pid)
    server.start()
    with redis.Redis.from_url(server.url) as client:
        # The reply came after the write reached the file; only an OS crash could lose it.
        assert client.get("acknowledged") == b"1"


def test_restart_keeps_port_and_url(make_redis_server: MakeRedisServer) -> None:
    server = make_redis_server()
    url, old_pid = server.url, server.pid
    server.restart()
    assert server.url == url
    assert server.pid != old_pid
    with redis.Redis.from_url(url) as client:
        assert client.ping()


def test_pid_is_gone_after_stop(make_redis_server: MakeRedisServer) -> None:
    server = make_redis_server()
    pid = server.pid
    assert pid is not None and pid_exists(pid)
    server.stop()
    assert server.pid is None
    assert not pid_exists(pid)
    server.stop()  # stopping twice is harmless


def test_start_failure_reports_the_log(make_redis_server: MakeRedisServer, tmp_path: Path) -> None:
    taken = make_redis_server()
    clash = RedisServer(tmp_path / "clash", port=taken.port)
    with pytest.raises(RedisServerError, match=r"(?s)exited with code.*in use"):
        clash.start()
    assert not clash.running


def test_rq_round_trip(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as connection:
        queue = Queue("round-trip", connection=connection)
        job = queue.enqueue(len, [1, 2, 3])
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            assert SimpleWorker([queue], connection=connection).work(burst=True)
        finally:
            for sig, handler in handlers.items():  # the worker leaves its own installed
                signal.signal(sig, handler)
        job.refresh()
        assert job.is_finished
        assert job.return_value() == 3


def test_env_var_chooses_the_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = find_server_binary()
    monkeypatch.setenv(SERVER_ENV_VAR, str(chosen))
    assert find_server_binary() == chosen
    monkeypatch.setenv(SERVER_ENV_VAR, "/nonexistent/redis-server")
    with pytest.raises(RedisServerError, match=SERVER_ENV_VAR):
        find_server_binary()


def test_no_binary_anywhere_names_the_remedies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SERVER_ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr("cronq.redis_server._bundled_binary", lambda: (None, "not here"))
    with pytest.raises(RedisServerError, match=rf"{SERVER_ENV_VAR}.*redis-server.*not here"):
        find_server_binary()
