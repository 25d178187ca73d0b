"""Targets (DESIGN §5): noop, http against a real local HTTP server, rq against fakeredis with a
real RQ SimpleWorker running the enqueued function and the callbacks."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fakeredis
import pytest
import redis
from rq import Queue, SimpleWorker, Worker
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry

from cronq import __version__
from cronq.statemachine import InvocationStatus
from cronq.target_specs import HttpTarget, NoopTarget, RqTarget
from cronq.targets import Accepted, Finished, InvocationContext, allowed, target_for
from cronq.targets import rq as rq_target
from cronq.targets.base import MAX_ERROR_LENGTH, describe_error
from cronq.targets.http import HttpInvoker, safe_url
from cronq.targets.noop import NoopInvoker
from cronq.targets.rq import ALLOWED_MODULES_ENV, RqInvoker, enqueue_many, rq_job_id

SUCCEEDED, FAILED = InvocationStatus.SUCCEEDED, InvocationStatus.FAILED
TIMED_OUT, ABORTED = InvocationStatus.TIMED_OUT, InvocationStatus.ABORTED
SCHEDULED_FOR = datetime(2026, 1, 1, 2, 30, tzinfo=timezone.utc)


def context(deadline_in: float = 10.0, invocation_id: str = "20260101T023000-ab12cd34") -> Any:
    return InvocationContext(
        job_id="billing/nightly",
        invocation_id=invocation_id,
        scheduled_for=SCHEDULED_FOR,
        attempt=2,
        payload={"rows": [1, 2]},
        metadata={"team": "payments"},
        deadline=datetime.now(timezone.utc) + timedelta(seconds=deadline_in),
        namespace="cronq",
    )


@pytest.fixture
def fake() -> redis.Redis:
    return fakeredis.FakeRedis()


# -- the interface -----------------------------------------------------------------------------


def test_target_for_dispatches_on_the_spec_type() -> None:
    assert isinstance(target_for(NoopTarget()), NoopInvoker)
    assert isinstance(target_for(HttpTarget(url="http://x.example/")), HttpInvoker)
    assert isinstance(target_for(RqTarget(func="a.b")), RqInvoker)
    with pytest.raises(TypeError, match="no target for str"):
        target_for("noop")  # type: ignore[arg-type]


def test_errors_name_the_type_mask_secrets_and_stay_bounded() -> None:
    assert describe_error(ValueError("bad")) == "ValueError: bad"
    assert describe_error(KeyError()) == "KeyError"
    assert describe_error(OSError("token hunter2 leaked"), ["hunter2", "ab"]) == (
        "OSError: token *** leaked"
    )
    long = describe_error(RuntimeError("x" * 10_000))
    assert len(long) == MAX_ERROR_LENGTH and long.endswith("(truncated)")


# -- noop --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail", "expected"),
    [(False, Finished(SUCCEEDED)), (True, Finished(FAILED, "noop: fail: true"))],
)
def test_noop_sleeps_then_succeeds_or_fails(
    fake: redis.Redis, fail: bool, expected: Finished
) -> None:
    started = time.monotonic()
    result = target_for(NoopTarget(sleep="100ms", fail=fail)).invoke(context(), fake)
    assert result == expected
    assert time.monotonic() - started >= 0.1


def test_noop_gives_up_at_the_deadline(fake: redis.Redis) -> None:
    started = time.monotonic()
    result = target_for(NoopTarget(sleep="30s", fail=True)).invoke(context(0.2), fake)
    assert isinstance(result, Finished) and result.outcome is TIMED_OUT
    assert 0.1 <= time.monotonic() - started < 2


# -- http --------------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    port: int
    requests: list[Seen] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"


@pytest.fixture
def server() -> Iterator[Server]:
    record = Server(port=0)

    class Handler(BaseHTTPRequestHandler):
        def handle_any(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length)
            record.requests.append(Seen(self.command, self.path, dict(self.headers), body))
            path = self.path.partition("?")[0]
            if path == "/slow":
                time.sleep(1.0)
            status, location = {
                "/fail": (500, None),
                "/missing": (404, None),
                "/to-https": (302, record.url("/ok", scheme="https")),
                "/to-localhost": (302, record.url("/ok", host="localhost")),
                "/to-ok": (302, "/ok"),
            }.get(path, (200, None))
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_HEAD = handle_any

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    record.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield record
    httpd.shutdown()
    httpd.server_close()


def fetch(fake: redis.Redis, deadline_in: float = 10.0, **spec: Any) -> Finished:
    result = target_for(HttpTarget(**spec)).invoke(context(deadline_in), fake)
    assert isinstance(result, Finished)
    return result


def test_http_success_sends_cronq_headers(server: Server, fake: redis.Redis) -> None:
    result = fetch(fake, url=server.url("/ok"), headers={"X-Team": "payments"})
    assert result == Finished(SUCCEEDED)
    [seen] = server.requests
    assert (seen.method, seen.path) == ("GET", "/ok")
    assert seen.headers["User-Agent"] == f"cronq/{__version__}"
    assert seen.headers["X-Cronq-Job"] == "billing/nightly"
    assert seen.headers["X-Cronq-Invocation"] == "20260101T023000-ab12cd34"
    assert seen.headers["X-Cronq-Scheduled-For"] == "2026-01-01T02:30:00+00:00"
    assert seen.headers["X-Team"] == "payments"


@pytest.mark.parametrize(
    ("body", "sent", "content_type"),
    [
        ({"a": [1, "é"]}, '{"a":[1,"é"]}'.encode(), "application/json"),
        ("plain", b"plain", "text/plain; charset=utf-8"),
    ],
)
def test_http_body_is_text_or_json(
    server: Server, fake: redis.Redis, body: Any, sent: bytes, content_type: str
) -> None:
    assert fetch(fake, url=server.url("/ok"), method="POST", body=body).outcome is SUCCEEDED
    [seen] = server.requests
    assert (seen.method, seen.body, seen.headers["Content-Type"]) == ("POST", sent, content_type)


def test_http_user_content_type_wins(server: Server, fake: redis.Redis) -> None:
    headers = {"content-type": "application/vnd.x+json"}
    fetch(fake, url=server.url("/ok"), method="PUT", body=[1], headers=headers)
    assert server.requests[0].headers["Content-Type"] == "application/vnd.x+json"


def test_http_status_outside_success_codes_fails(server: Server, fake: redis.Redis) -> None:
    assert fetch(fake, url=server.url("/fail")) == Finished(FAILED, "HTTP 500")
    assert fetch(fake, url=server.url("/missing"), success_codes=[404]).outcome is SUCCEEDED
    assert fetch(fake, url=server.url("/ok"), success_codes=["3xx"]) == Finished(FAILED, "HTTP 200")


def test_http_slow_response_times_out_at_the_deadline(server: Server, fake: redis.Redis) -> None:
    started = time.monotonic()
    result = fetch(fake, deadline_in=0.2, url=server.url("/slow"))
    assert result.outcome is TIMED_OUT
    assert result.error and "GET http://127.0.0.1" in result.error
    assert time.monotonic() - started < 0.9


def test_http_spec_timeout_applies_before_the_deadline(server: Server, fake: redis.Redis) -> None:
    assert fetch(fake, url=server.url("/slow"), timeout="200ms").outcome is TIMED_OUT


def test_http_past_deadline_sends_nothing(server: Server, fake: redis.Redis) -> None:
    assert fetch(fake, deadline_in=-1, url=server.url("/ok")).outcome is TIMED_OUT
    assert server.requests == []


def refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_http_refused_connection_fails_without_leaking_credentials(fake: redis.Redis) -> None:
    port = refused_port()
    url = f"http://alice:s3cr%40t@127.0.0.1:{port}/hook?token=qwerty123"
    result = fetch(fake, url=url, headers={"Authorization": "Bearer abcdef123456"})
    assert result.outcome is FAILED
    assert result.error and result.error.startswith(f"GET http://127.0.0.1:{port}/hook: ")
    assert "ConnectionRefusedError" in result.error
    for secret in ("s3cr", "alice:", "qwerty123", "abcdef123456"):
        assert secret not in result.error


def test_http_url_credentials_become_basic_auth(server: Server, fake: redis.Redis) -> None:
    url = server.url("/ok").replace("//", "//alice:s3cr%40t@")
    assert fetch(fake, url=url).outcome is SUCCEEDED
    # base64("alice:s3cr@t")
    assert server.requests[0].headers["Authorization"] == "Basic YWxpY2U6czNjckB0"


def test_safe_url_drops_userinfo_query_and_fragment() -> None:
    assert safe_url("https://u:p@h.example:8443/a/b?k=v#f") == "https://h.example:8443/a/b"


def test_http_does_not_follow_a_redirect_that_changes_scheme(
    server: Server, fake: redis.Redis
) -> None:
    result = fetch(fake, url=server.url("/to-https"))
    assert result.outcome is FAILED
    assert result.error and "changes the scheme" in result.error
    assert [seen.path for seen in server.requests] == ["/to-https"]


def test_http_redirect_to_another_host_drops_credentials(server: Server, fake: redis.Redis) -> None:
    auth = {"Authorization": "Bearer abcdef123456", "X-Keep": "yes"}
    assert fetch(fake, url=server.url("/to-localhost"), headers=auth).outcome is SUCCEEDED
    first, second = server.requests
    assert second.path == "/ok" and "Authorization" not in second.headers
    assert second.headers["X-Keep"] == "yes"
    assert first.headers["Authorization"] == "Bearer abcdef123456"


def test_http_same_host_redirect_keeps_credentials(server: Server, fake: redis.Redis) -> None:
    auth = {"Authorization": "Bearer abcdef123456"}
    assert fetch(fake, url=server.url("/to-ok"), headers=auth).outcome is SUCCEEDED
    assert server.requests[1].headers["Authorization"] == "Bearer abcdef123456"


def test_http_redirect_listed_as_success_is_not_followed(server: Server, fake: redis.Redis) -> None:
    assert fetch(fake, url=server.url("/to-ok"), success_codes=[302]).outcome is SUCCEEDED
    assert len(server.requests) == 1


# -- rq ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "func", "ok"),
    [
        (None, "anything.at.all", True),
        ("", "anything.at.all", True),
        ("billing", "billing.reports.nightly", True),
        ("billing", "billingx.reports", False),
        ("myapp.jobs, billing", "myapp.jobs.cleanup", True),
        ("myapp.jobs,billing", "myapp.other.cleanup", False),
        ("myapp.jobs.", "myapp.jobs.cleanup", True),
        ("myapp.jobs.cleanup", "myapp.jobs.cleanup", True),
    ],
)
def test_allowed_matches_module_prefixes(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, func: str, ok: bool
) -> None:
    if setting is None:
        monkeypatch.delenv("CRONQ_ALLOWED_MODULES", raising=False)
    else:
        monkeypatch.setenv("CRONQ_ALLOWED_MODULES", setting)
    assert allowed(func) is ok


def test_rq_job_ids_are_valid_deterministic_and_distinct() -> None:
    assert rq_job_id("20260101T023000-ab12cd34") == "cronq-inv-20260101T023000-ab12cd34"
    odd = [rq_job_id("a/b:c"), rq_job_id("a/b:d"), rq_job_id("x" * 500)]
    assert len(set(odd)) == 3
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", job_id) for job_id in odd)
    assert rq_job_id("a/b:c") == odd[0]


def test_rq_refuses_a_func_outside_the_allowed_modules(
    monkeypatch: pytest.MonkeyPatch, fake: redis.Redis
) -> None:
    monkeypatch.setenv("CRONQ_ALLOWED_MODULES", "billing")
    result = target_for(RqTarget(func="os.system", args=["true"])).invoke(context(), fake)
    assert result == Finished(FAILED, "func os.system is not under CRONQ_ALLOWED_MODULES")
    assert Queue("default", connection=fake).count == 0


def test_rq_enqueues_once_with_meta_timeout_and_callbacks(fake: redis.Redis) -> None:
    spec = RqTarget(func="tests.rq_funcs.add", queue="reports", args=[1], kwargs={"b": 2})
    result = target_for(spec).invoke(context(deadline_in=90.5), fake)
    assert isinstance(result, Accepted) and "enqueued" in result.detail
    queue = Queue("reports", connection=fake)
    assert queue.job_ids == ["cronq-inv-20260101T023000-ab12cd34"]
    job = Job.fetch(queue.job_ids[0], connection=fake)
    assert (job.func_name, job.args, job.kwargs) == ("tests.rq_funcs.add", [1], {"b": 2})
    assert job.timeout == 91 and job.ttl == 91
    assert job.meta == {
        "cronq": {
            "job_id": "billing/nightly",
            "invocation_id": "20260101T023000-ab12cd34",
            "scheduled_for": "2026-01-01T02:30:00+00:00",
            "attempt": 2,
            "payload": {"rows": [1, 2]},
            "metadata": {"team": "payments"},
            "namespace": "cronq",
        }
    }
    names = (job._success_callback_name, job._failure_callback_name, job._stopped_callback_name)
    assert names == tuple(f"cronq.targets.rq.on_{n}" for n in ("success", "failure", "stopped"))

    again = target_for(spec).invoke(context(), fake)
    assert isinstance(again, Accepted) and "already enqueued" in again.detail
    assert queue.count == 1


def test_rq_job_timeout_rounds_up_to_whole_seconds(fake: redis.Redis) -> None:
    target_for(RqTarget(func="tests.rq_funcs.add")).invoke(context(deadline_in=0.2), fake)
    assert Job.fetch(rq_job_id(context().invocation_id), connection=fake).timeout == 1


def test_rq_past_deadline_enqueues_nothing(fake: redis.Redis) -> None:
    result = target_for(RqTarget(func="tests.rq_funcs.add")).invoke(context(-1), fake)
    assert isinstance(result, Finished) and result.outcome is TIMED_OUT
    assert Queue("default", connection=fake).count == 0


def test_rq_enqueue_error_is_a_failure_not_a_crash() -> None:
    server = fakeredis.FakeServer()
    server.connected = False
    broken = fakeredis.FakeRedis(server=server)
    result = target_for(RqTarget(func="tests.rq_funcs.add")).invoke(context(), broken)
    assert isinstance(result, Finished) and result.outcome is FAILED
    assert result.error and result.error.startswith("enqueue: ConnectionError")


def test_rq_enqueue_many_answers_each_call_in_order(
    fake: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ALLOWED_MODULES_ENV, "tests")
    add, other = RqTarget(func="tests.rq_funcs.add"), RqTarget(func="tests.rq_funcs.add", queue="b")
    target_for(add).invoke(context(invocation_id="inv-0"), fake)  # enqueued before the batch
    calls = [
        (add, context(invocation_id="inv-0")),
        (add, context(invocation_id="inv-1")),
        (RqTarget(func="os.system"), context(invocation_id="inv-2")),
        (other, context(invocation_id="inv-3")),
        (add, context(-1, invocation_id="inv-4")),
    ]
    outcomes = enqueue_many(calls, fake)
    assert [type(o).__name__ for o in outcomes] == [
        "Accepted", "Accepted", "Finished", "Accepted", "Finished"
    ]  # fmt: skip
    assert "already enqueued" in str(outcomes[0]) and "inv-1 enqueued" in str(outcomes[1])
    assert isinstance(outcomes[4], Finished) and outcomes[4].outcome is TIMED_OUT
    assert Queue("default", connection=fake).job_ids == [rq_job_id("inv-0"), rq_job_id("inv-1")]
    assert Queue("b", connection=fake).job_ids == [rq_job_id("inv-3")]


def test_rq_enqueue_many_that_loses_a_race_redoes_each_call(
    fake: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another start enqueues one of the batch's jobs between the check and the commit: the
    commit fails as a whole, and each call is done again on its own, so none runs twice."""
    enqueue = rq_target.enqueue_in
    raced: list[str] = []

    def racing(pipe: Any, queue: Queue, spec: RqTarget, ctx: InvocationContext) -> None:
        if not raced:
            raced.append(ctx.invocation_id)
            fake.hset(Job.key_for(rq_job_id(ctx.invocation_id)), "status", "queued")
        enqueue(pipe, queue, spec, ctx)

    monkeypatch.setattr(rq_target, "enqueue_in", racing)
    spec = RqTarget(func="tests.rq_funcs.add")
    outcomes = enqueue_many([(spec, context(invocation_id=f"inv-{i}")) for i in range(3)], fake)
    assert raced == ["inv-0"]
    assert [isinstance(o, Accepted) and "already" in o.detail for o in outcomes] == [
        True, False, False
    ]  # fmt: skip
    assert Queue("default", connection=fake).job_ids == [rq_job_id("inv-1"), rq_job_id("inv-2")]


Report = tuple[str, str, str, InvocationStatus, str | None]


@pytest.fixture
def reports(monkeypatch: pytest.MonkeyPatch) -> list[Report]:
    seen: list[Report] = []

    def report_outcome(
        connection: redis.Redis,
        namespace: str,
        job_id: str,
        invocation_id: str,
        outcome: InvocationStatus,
        error: str | None,
    ) -> None:
        assert isinstance(connection, redis.Redis)
        seen.append((namespace, job_id, invocation_id, outcome, error))

    monkeypatch.setattr("cronq.engine.report_outcome", report_outcome)
    return seen


def run_once(fake: redis.Redis, spec: RqTarget, deadline_in: float = 10.0) -> None:
    assert isinstance(target_for(spec).invoke(context(deadline_in), fake), Accepted)
    SimpleWorker([Queue(spec.queue, connection=fake)], connection=fake).work(burst=True)


def test_rq_success_is_reported(fake: redis.Redis, reports: list[Report]) -> None:
    run_once(fake, RqTarget(func="tests.rq_funcs.add", args=[1, 2]))
    assert reports == [("cronq", "billing/nightly", "20260101T023000-ab12cd34", SUCCEEDED, None)]


def test_rq_failure_is_reported_with_the_error(fake: redis.Redis, reports: list[Report]) -> None:
    run_once(fake, RqTarget(func="tests.rq_funcs.boom", args=["disk full"]))
    assert [(r[3], r[4]) for r in reports] == [(FAILED, "ValueError: disk full")]


def test_rq_job_timeout_is_reported_as_timed_out(fake: redis.Redis, reports: list[Report]) -> None:
    run_once(fake, RqTarget(func="tests.rq_funcs.nap", args=[5]), deadline_in=0.5)
    [report] = reports
    assert report[3] is TIMED_OUT and report[4] and "JobTimeoutException" in report[4]


def test_rq_abandoned_job_is_reported_failed(fake: redis.Redis, reports: list[Report]) -> None:
    """A worker that died mid-job: RQ's registry cleanup calls the failure callback."""
    target_for(RqTarget(func="tests.rq_funcs.add")).invoke(context(), fake)
    job = Job.fetch(rq_job_id(context().invocation_id), connection=fake)
    job.set_status(JobStatus.STARTED)
    registry = StartedJobRegistry("default", connection=fake)
    fake.zadd(registry.key, {f"{job.id}:dead-execution": time.time() - 10})
    registry.cleanup()
    assert [(r[3], r[4]) for r in reports] == [
        (FAILED, "AbandonedJobError: the RQ worker running the job died")
    ]


def test_rq_stopped_callback_reports_aborted(fake: redis.Redis, reports: list[Report]) -> None:
    from cronq.targets.rq import on_stopped

    target_for(RqTarget(func="tests.rq_funcs.add")).invoke(context(), fake)
    on_stopped(Job.fetch(rq_job_id(context().invocation_id), connection=fake), fake)
    assert [(r[3], r[4]) for r in reports] == [(ABORTED, "the RQ job was stopped")]


def test_rq_callback_ignores_jobs_without_cronq_meta(
    fake: redis.Redis, reports: list[Report]
) -> None:
    Queue("default", connection=fake).enqueue_call("tests.rq_funcs.add", args=[1])
    from cronq.targets.rq import on_success

    on_success(Queue("default", connection=fake).jobs[0], fake, 1)
    assert reports == []


def test_rq_abort_cancels_a_waiting_job(fake: redis.Redis) -> None:
    target = target_for(RqTarget(func="tests.rq_funcs.add"))
    target.invoke(context(), fake)
    target.abort(context().invocation_id, fake)
    job = Job.fetch(rq_job_id(context().invocation_id), connection=fake)
    assert job.get_status() == JobStatus.CANCELED
    assert Queue("default", connection=fake).count == 0


def test_rq_abort_stops_a_running_job(fake: redis.Redis) -> None:
    target = target_for(RqTarget(func="tests.rq_funcs.add"))
    target.invoke(context(), fake)
    job = Job.fetch(rq_job_id(context().invocation_id), connection=fake)
    job.worker_name = "worker-1"
    job.save()
    job.set_status(JobStatus.STARTED)
    channel = fake.pubsub()
    channel.subscribe("rq:pubsub:worker-1")
    channel.get_message(timeout=1)  # the subscribe confirmation
    target.abort(context().invocation_id, fake)
    message = channel.get_message(timeout=1)
    assert message and json.loads(message["data"]) == {"command": "stop-job", "job_id": job.id}


def test_rq_abort_of_an_unknown_invocation_does_nothing(fake: redis.Redis) -> None:
    target_for(RqTarget(func="tests.rq_funcs.add")).abort("never-started", fake)
    assert fake.keys("*") == []


def test_http_errors_never_carry_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever urllib raises, and whatever it quotes, secrets are masked in the error."""

    class Opener:
        def open(self, request: Any, timeout: float) -> Any:
            headers = dict(request.header_items())
            raise RuntimeError(f"quoting {request.full_url} {headers} t=qwerty123 p=s3cr@t")

    monkeypatch.setattr("urllib.request.build_opener", lambda *handlers: Opener())
    url = "https://alice:s3cr%40t@h.example/hook?t=qwerty123"
    result = target_for(HttpTarget(url=url, headers={"X-Api-Key": "key-0123456789"})).invoke(
        context(), fakeredis.FakeRedis()
    )
    assert isinstance(result, Finished) and result.outcome is FAILED
    assert result.error and result.error.startswith("GET https://h.example/hook: RuntimeError")
    for secret in ("s3cr", "qwerty123", "key-0123456789", "YWxpY2U6czNjckB0"):
        assert secret not in result.error


# -- rq on a real Redis server (the session server of tests/conftest.py) -------------------------
# The worker forks a work horse here, as in production: callbacks run in the horse (success,
# failure, timeout) or in the worker (stopped), so reports travel through Redis, not a list.

REPORTS_KEY = "test:reports"


@pytest.fixture
def real(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    def report_outcome(
        connection: redis.Redis,
        namespace: str,
        job_id: str,
        invocation_id: str,
        outcome: InvocationStatus,
        error: str | None,
    ) -> None:
        entry = [namespace, job_id, invocation_id, outcome.value, error]
        connection.rpush(REPORTS_KEY, json.dumps(entry))

    monkeypatch.setattr("cronq.engine.report_outcome", report_outcome)
    with redis.Redis.from_url(redis_url) as connection:
        yield connection


def real_reports(connection: redis.Redis) -> list[tuple[str, str | None]]:
    entries = [json.loads(raw) for raw in connection.lrange(REPORTS_KEY, 0, -1)]
    return [(entry[3], entry[4]) for entry in entries]


def work(connection: redis.Redis, queue: str = "default") -> None:
    Worker([Queue(queue, connection=connection)], connection=connection).work(burst=True)


@pytest.mark.parametrize(
    ("func", "args", "deadline_in", "expected"),
    [
        ("tests.rq_funcs.add", [1, 2], 10.0, [("SUCCEEDED", None)]),
        ("tests.rq_funcs.boom", ["disk full"], 10.0, [("FAILED", "ValueError: disk full")]),
    ],
)
def test_real_redis_rq_outcome_is_reported_from_the_horse(
    real: redis.Redis, func: str, args: list[Any], deadline_in: float, expected: list[Any]
) -> None:
    target = target_for(RqTarget(func=func, args=args))
    assert isinstance(target.invoke(context(deadline_in), real), Accepted)
    assert "already enqueued" in str(target.invoke(context(deadline_in), real))
    work(real)
    assert real_reports(real) == expected


def test_real_redis_rq_timeout_is_reported(real: redis.Redis) -> None:
    target_for(RqTarget(func="tests.rq_funcs.nap", args=[5])).invoke(context(0.5), real)
    work(real)
    [(outcome, error)] = real_reports(real)
    assert outcome == "TIMED_OUT" and error and "JobTimeoutException" in error


def test_real_redis_rq_abort_stops_the_running_job(real: redis.Redis) -> None:
    target = target_for(RqTarget(func="tests.rq_funcs.nap", args=[5]))
    target.invoke(context(), real)
    job = Job.fetch(rq_job_id(context().invocation_id), connection=real)

    def abort_once_started() -> None:
        for _ in range(400):
            if job.get_status() == JobStatus.STARTED:
                target.abort(context().invocation_id, real)
                return
            time.sleep(0.01)

    aborter = threading.Thread(target=abort_once_started)
    aborter.start()
    started = time.monotonic()
    work(real)
    aborter.join()
    assert time.monotonic() - started < 4
    assert real_reports(real) == [("ABORTED", "the RQ job was stopped")]
    assert job.get_status() == JobStatus.STOPPED
