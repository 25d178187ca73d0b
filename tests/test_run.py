"""`cronq run`: end to end with real processes (the command, its workers, its embedded server) in a
temporary directory, stopped as a terminal would (SIGINT to the process group), and checked for
leftovers by pid. Every process a test starts is gone at teardown, passed or failed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from cronq.cli import main
from cronq.redis_server import RedisServer
from cronq.runner.fires import describe
from cronq.runner.workers import WorkerPool
from tests.engine_harness import wait_until

_CRONQ = (sys.executable, "-c", "from cronq.cli import main; main(prog_name='cronq')")
_HELLO = Path(__file__).resolve().parent.parent / "examples" / "hello.yaml"
_EVERY_SECOND = '"* * * * * *"'
_READY = 30.0
_STOPPED = 40.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and flock")


def hello_config(directory: Path, *, extra_job: str = "") -> Path:
    """The hello example, firing every second (and with one more job, if given)."""
    text = re.sub(r'schedule: "[^"]*"', f"schedule: {_EVERY_SECOND}", _HELLO.read_text(), count=1)
    if extra_job:
        text += f"  - name: {extra_job}\n    schedule: {_EVERY_SECOND}\n    noop: {{}}\n"
    path = directory / "hello.yaml"
    path.write_text(text)
    return path


def embedded_env() -> dict[str, str]:
    """The environment, less what would point `cronq run` at another server or namespace."""
    return {k: v for k, v in os.environ.items() if k not in ("CRONQ_REDIS_URL", "CRONQ_NAMESPACE")}


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: it has exited, only its parent has not looked)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def succeeded(url: str, job: str) -> list[str]:
    """Ids of the job's SUCCEEDED invocations (none if it has no history yet)."""
    result = CliRunner().invoke(main, ["history", job, "-n", "1000", "--json", "--redis-url", url])
    if result.exit_code != 0:
        return []
    return [entry["id"] for entry in json.loads(result.stdout) if entry["status"] == "SUCCEEDED"]


@dataclass
class Run:
    """One `cronq run` process, in its own process group like a shell job, output in files."""

    cwd: Path
    process: subprocess.Popen[bytes]
    logs: tuple[Path, Path]
    children: set[int] = field(default_factory=set)

    @property
    def data(self) -> Path:
        return self.cwd / ".cronq"

    def output(self) -> str:
        return self.logs[0].read_text()

    def errors(self) -> str:
        return self.logs[1].read_text()

    def wait_ready(self) -> str:
        """The embedded server's URL, once the workers run; notes the pids it started."""
        wait_until(
            lambda: "running:" in self.output() or self.process.poll() is not None,
            timeout=_READY,
            what="cronq run to start",
        )
        assert self.process.poll() is None, self.output() + self.errors()
        self.children.add(int((self.data / "server.pid").read_text()))
        self.workers()
        url = (self.data / "url").read_text().strip()
        assert f"redis: {url}" in self.output()
        return url

    def workers(self) -> list[int]:
        """Pids of the workers started so far, newest last (and noted for teardown)."""
        pids = [int(pid) for pid in re.findall(r"started \(pid (\d+)", self.output())]
        self.children |= set(pids)
        return pids

    def interrupt(self) -> int:
        """Ctrl-C as a terminal sends it (to the whole foreground process group); exit status."""
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(_STOPPED)

    def stop(self) -> None:
        """Teardown: stop it if it still runs, then kill anything it started that is left."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(_STOPPED)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in self.children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


class Runs:
    """Starts `cronq run` processes; `stop_all` ends them and everything they started."""

    def __init__(self) -> None:
        self.started: list[Run] = []

    def start(self, cwd: Path, *args: str) -> Run:
        number = len(self.started)
        logs = (cwd / f"run-{number}.out", cwd / f"run-{number}.err")
        with logs[0].open("wb") as out, logs[1].open("wb") as err:
            process = subprocess.Popen(
                [*_CRONQ, "run", *args],
                cwd=cwd,
                env=embedded_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        run = Run(cwd, process, logs)
        self.started.append(run)
        return run

    def stop_all(self) -> None:
        for run in self.started:
            run.stop()


@pytest.fixture
def runs() -> Iterator[Runs]:
    started = Runs()
    try:
        yield started
    finally:
        started.stop_all()


def test_run_fires_stops_cleanly_and_keeps_everything_across_restarts(
    tmp_path: Path, runs: Runs
) -> None:
    hello_config(tmp_path)
    first = runs.start(tmp_path, "--config", "hello.yaml")
    url = first.wait_ready()
    before = wait_until(
        lambda: len(succeeded(url, "hello/tick")) >= 2 and succeeded(url, "hello/tick"),
        timeout=20,
        what="two SUCCEEDED runs",
    )
    wait_until(
        lambda: re.search(
            r"\d\d:\d\d:\d\d hello/tick SUCCEEDED \d+ ms \(lag \d+ ms\)", first.output()
        ),
        timeout=5,
        what="the fire printed",
    )

    with redis.Redis.from_url(url) as client:
        assert client.config_get("hash-max-listpack-value") == {"hash-max-listpack-value": "128"}

    crashed = first.workers()[-1]
    os.kill(crashed, signal.SIGKILL)
    wait_until(lambda: len(first.workers()) == 2, timeout=10, what="the worker started again")
    assert f"worker 1 exited (code -{signal.SIGKILL.value}); restarting in 1 s" in first.output()
    count = len(succeeded(url, "hello/tick"))
    wait_until(lambda: len(succeeded(url, "hello/tick")) > count, timeout=10, what="more runs")

    assert first.interrupt() == 0, first.errors()
    assert not [pid for pid in first.children if alive(pid)], "a process outlived cronq run"
    assert not (first.data / "url").exists()
    assert "server stopped" in first.output()

    second = runs.start(tmp_path, "--config", "hello.yaml")
    url = second.wait_ready()
    assert [row["id"] for row in cli_json("jobs", "--redis-url", url)] == ["hello/tick"]
    assert "0 added, 0 changed, 0 removed, 1 unchanged" in second.output()
    after = wait_until(
        lambda: (ids := succeeded(url, "hello/tick")) and len(ids) > len(before) and ids,
        timeout=20,
        what="new runs after the restart",
    )
    assert set(before) <= set(after), "history was lost across the restart"
    assert second.interrupt() == 0
    assert not [pid for pid in second.children if alive(pid)]


def test_a_second_run_in_the_same_directory_is_refused(tmp_path: Path, runs: Runs) -> None:
    hello_config(tmp_path)
    first = runs.start(tmp_path, "--config", "hello.yaml")
    url = first.wait_ready()
    second = subprocess.run(
        [*_CRONQ, "run", "--config", "hello.yaml"],
        cwd=tmp_path,
        env=embedded_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 1
    assert f"another cronq run is using ./.cronq (pid {first.process.pid})" in second.stderr
    assert first.process.poll() is None
    assert (first.data / "url").read_text().strip() == url
    assert first.interrupt() == 0


def test_an_invalid_config_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text(
        'project: hello\njobs:\n  - name: tick\n    schedule: "every day at noon"\n    noop: {}\n'
    )
    result = subprocess.run(
        [*_CRONQ, "run", "--config", "hello.yaml"],
        cwd=tmp_path,
        env=embedded_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("hello.yaml:4: job tick: schedule: ")
    assert not (tmp_path / ".cronq").exists()
    assert "redis:" not in result.stdout


def test_a_changed_config_is_applied_again_and_a_broken_one_is_not(
    tmp_path: Path, runs: Runs
) -> None:
    config = hello_config(tmp_path)
    run = runs.start(tmp_path, "--config", "hello.yaml")
    url = run.wait_ready()

    config.write_text(config.read_text() + "  - name: broken\n    schedule: nope\n    noop: {}\n")
    wait_until(
        lambda: "last good config keeps running" in run.errors(),
        timeout=10,
        what="the broken edit reported",
    )
    assert "hello.yaml:" in run.errors()
    count = len(succeeded(url, "hello/tick"))
    wait_until(
        lambda: len(succeeded(url, "hello/tick")) > count,
        timeout=10,
        what="the last good config still firing",
    )

    hello_config(tmp_path, extra_job="tock")
    wait_until(lambda: succeeded(url, "hello/tock"), timeout=20, what="the added job firing")
    assert "+ hello/tock" in run.output()
    assert run.interrupt() == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_run_leaves_no_orphans_and_a_leftover_server_is_replaced(
    tmp_path: Path, runs: Runs
) -> None:
    hello_config(tmp_path)
    first = runs.start(tmp_path, "--config", "hello.yaml")
    url = first.wait_ready()
    before = wait_until(lambda: succeeded(url, "hello/tick"), timeout=20, what="a SUCCEEDED run")
    first.process.kill()
    first.process.wait()
    wait_until(
        lambda: not [pid for pid in first.children if alive(pid)],
        timeout=15,
        what="the workers and the server to follow cronq run",
    )

    # A server a crashed run left behind (as where the kernel cannot stop it): replaced safely.
    leftover = RedisServer(first.data, appendonly=True)
    leftover.start()
    leftover_pid = leftover.pid
    try:
        (first.data / "server.pid").write_text(f"{leftover_pid}\n")
        second = runs.start(tmp_path, "--config", "hello.yaml")
        url = second.wait_ready()
        assert f"left running (pid {leftover_pid})" in second.output()
        assert not leftover.running
    finally:
        leftover.kill()
    wait_until(
        lambda: set(before) < set(succeeded(url, "hello/tick")),
        timeout=20,
        what="the old history and new runs",
    )
    assert second.interrupt() == 0


def test_a_finished_run_is_one_line_with_its_duration_and_lag() -> None:
    entry = {
        "job": "hello/tick",
        "status": "FAILED",
        "scheduled_for": "2026-01-02T13:40:02+00:00",
        "started_at": "2026-01-02T13:40:02.020000+00:00",
        "finished_at": "2026-01-02T13:40:14.520000+00:00",
        "attempt": 2,
        "error": "ValueError: boom\nTraceback ...",
    }
    line = describe(entry)
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d hello/tick FAILED 12\.5 s \(lag 20 ms\) attempt 2: "
        r"ValueError: boom",
        line,
    ), line
    skipped = {"job": "a/b", "status": "SKIPPED", "scheduled_for": "2026-01-02T13:40:02+00:00"}
    assert re.fullmatch(r"\d\d:\d\d:\d\d a/b SKIPPED \(tick \d\d:\d\d:\d\d\)", describe(skipped))


def test_help_reads_like_a_manual_page() -> None:
    text = CliRunner().invoke(main, ["run", "--help"]).output
    for part in ("SIGNALS", "FILES", "EXAMPLES", "cronq run --config examples/hello.yaml"):
        assert part in text


@pytest.mark.parametrize(
    ("base", "ports"), [(None, [None, None]), (9100, ["9100", "9101"]), (0, ["0", "0"])]
)
def test_each_worker_gets_its_own_metrics_port(base: int | None, ports: list[str | None]) -> None:
    pool = WorkerPool(
        2, redis_url="redis://x", namespace="cronq", queues=(), metrics_port=base, say=print
    )
    commands = [pool._command(slot) for slot in pool.slots]
    found = [c[c.index("--metrics-port") + 1] if "--metrics-port" in c else None for c in commands]
    assert found == ports
