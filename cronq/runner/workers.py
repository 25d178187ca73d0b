"""The `cronq worker` processes of `cronq run`: started, restarted when they die, stopped warmly.

Workers are separate processes (not threads of `cronq run`) so that a user's function that
crashes or leaks cannot take the process tree down. The Redis URL reaches them in the environment,
never on the command line, so `ps` shows no password. A worker that exits on its own is started
again after a delay that doubles with each quick failure (1 s up to 30 s). Only the first runs the
watchdog: one is enough on one machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cronq.runner.children import child_setup

__all__ = ["WorkerPool"]

# The same `main` as the console script, without depending on PATH or the script's location.
_ENTRY = (sys.executable, "-c", "from cronq.cli import main; main(prog_name='cronq')", "worker")
_FIRST_DELAY = 1.0
_MAX_DELAY = 30.0
_HEALTHY_AFTER = 30.0  # a worker that ran this long was not a quick failure
_POLL = 0.05


@dataclass
class _Slot:
    index: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    delay: float = _FIRST_DELAY
    restart_at: float = 0.0
    signalled: bool = False  # SIGTERM sent: never send another (RQ would stop cold)
    retiring: bool = False  # stopped to pick up new queues: start again at once


class WorkerPool:
    """N `cronq worker` processes for cronq's queue and `queues`."""

    def __init__(
        self,
        count: int,
        *,
        redis_url: str,
        namespace: str,
        queues: Iterable[str],
        extra_args: Sequence[str] = (),
        metrics_port: int | None = None,
        say: Callable[[str], None],
    ) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        self.queues = tuple(sorted(set(queues)))
        self.extra_args = tuple(extra_args)
        self.metrics_port = metrics_port
        self.say = say
        self.slots = [_Slot(index) for index in range(count)]

    @property
    def pids(self) -> list[int]:
        return [s.process.pid for s in self.slots if s.process is not None]

    def start(self) -> None:
        for slot in self.slots:
            self._spawn(slot)

    def use_queues(self, queues: Iterable[str]) -> None:
        """Serve other user queues: each worker is stopped warmly and started with the new set."""
        wanted = tuple(sorted(set(queues)))
        if wanted == self.queues:
            return
        self.queues = wanted
        self.say(f"user queues now {', '.join(wanted) or '(none)'}: restarting workers")
        for slot in self.slots:
            slot.retiring = True
            self._terminate(slot)

    def check(self) -> None:
        """Notice workers that exited; start them again when their delay is over."""
        now = time.monotonic()
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is not None:
                self._exited(slot, slot.process.returncode, now)
            if slot.process is None and now >= slot.restart_at:
                self._spawn(slot)

    def stop(self, timeout: float, hurry: Callable[[], bool]) -> None:
        """SIGTERM each worker (it finishes its running targets), then wait; a worker still there
        after `timeout`, or once `hurry()` says so (a second Ctrl-C), is killed with everything
        it started (its process group, which exists while the worker does)."""
        for slot in self.slots:
            self._terminate(slot)
        deadline = time.monotonic() + timeout
        while self._alive() and time.monotonic() < deadline and not hurry():
            time.sleep(_POLL)
        for slot in self._alive():
            assert slot.process is not None
            self.say(f"worker {slot.index + 1} (pid {slot.process.pid}) did not stop: killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(slot.process.pid, signal.SIGKILL)
            slot.process.wait()
        for slot in self.slots:
            slot.process = None

    def _alive(self) -> list[_Slot]:
        return [s for s in self.slots if s.process is not None and s.process.poll() is None]

    def _command(self, slot: _Slot) -> list[str]:
        command = [*_ENTRY, "--namespace", self.namespace]
        for queue in self.queues:
            command += ["-q", queue]
        if slot.index > 0:
            command.append("--no-watchdog")
        if self.metrics_port is not None:  # one port per worker: each process has its counters
            port = self.metrics_port + slot.index if self.metrics_port else 0
            command += ["--metrics-port", str(port)]
        return [*command, *self.extra_args]

    def _spawn(self, slot: _Slot) -> None:
        slot.process = subprocess.Popen(
            self._command(slot),
            stdin=subprocess.DEVNULL,
            env={**os.environ, "CRONQ_REDIS_URL": self.redis_url},
            preexec_fn=child_setup(),
        )
        slot.started_at = time.monotonic()
        slot.signalled = slot.retiring = False
        queues = " + ".join(("cronq", *self.queues))
        watchdog = ", watchdog" if slot.index == 0 else ""
        self.say(f"worker {slot.index + 1} started (pid {slot.process.pid}, {queues}{watchdog})")

    def _terminate(self, slot: _Slot) -> None:
        if slot.process is not None and slot.process.poll() is None and not slot.signalled:
            slot.process.send_signal(signal.SIGTERM)
            slot.signalled = True

    def _exited(self, slot: _Slot, code: int, now: float) -> None:
        slot.process = None
        if slot.retiring:
            slot.restart_at = now
            return
        if now - slot.started_at >= _HEALTHY_AFTER:
            slot.delay = _FIRST_DELAY
        slot.restart_at = now + slot.delay
        self.say(f"worker {slot.index + 1} exited (code {code}); restarting in {slot.delay:g} s")
        slot.delay = min(slot.delay * 2, _MAX_DELAY)
