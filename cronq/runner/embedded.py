"""The embedded server of `cronq run` and the data directory it shares with nobody.

The directory (`./.cronq` by default) holds the server's append-only file and log, and:

    run.lock     flock()ed for the life of `cronq run`, with its pid: a second `cronq run` on the
                 same directory is refused instead of starting a second server on the same files
    port         the port last used, taken again when free, so URLs people noted stay valid
    url          where the running server answers (for `cronq history --redis-url ...`)
    server.pid   the running server's pid, so a server left by a crashed run can be stopped

A server left behind (the lock is free, yet `server.pid` names a live process) is stopped with
SIGTERM, so its append-only file is flushed, but only when that process works in this directory
(the server changes into it): a pid reused by an unrelated process is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from cronq.redis_server import RedisServer
from cronq.runner.children import child_setup

__all__ = ["SERVER_SETTINGS", "DataDir", "DataDirBusy", "start_server"]

# Idle jobs take 0.87 KiB instead of 1.47 KiB (benchmarks/RESULTS.md): the job's state and RQ's
# task data fit Redis's compact hash encoding. Given at start-up, not by CONFIG SET, so that it
# also applies to the hashes the server loads from its append-only file.
SERVER_SETTINGS = {"hash-max-listpack-value": "128"}
_LEFTOVER_WAIT = 10.0


class DataDirBusy(RuntimeError):
    """Another live `cronq run` holds the directory."""


class DataDir:
    """The files of one embedded server; `lock()` before touching any of them."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path = path.resolve()
        self.shown = shown  # as the user wrote it, for messages
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Hold `run.lock` until `unlock()` or death (the kernel drops it then)."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / "run.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirBusy(f"another cronq run is using {self.shown} (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def read(self, name: str) -> str | None:
        try:
            return (self.path / name).read_text().strip() or None
        except OSError:
            return None

    def write(self, name: str, value: str) -> None:
        temporary = self.path / f".{name}.tmp"
        temporary.write_text(value + "\n")
        temporary.replace(self.path / name)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / name).unlink()

    def stop_leftover_server(self) -> int | None:
        """Stop a server a crashed `cronq run` left running here; its pid, or None."""
        text = self.read("server.pid")
        pid = int(text) if text and text.isdigit() else None
        if pid is None or not _runs_in(pid, self.path):
            self.remove("server.pid")
            return None
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _LEFTOVER_WAIT
        while _runs_in(pid, self.path):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)
        self.remove("server.pid")
        return pid


def start_server(data: DataDir) -> RedisServer:
    """Start the embedded server (append-only, on the remembered port when it is free) and
    record where it runs."""
    remembered = data.read("port")
    port = int(remembered) if remembered and remembered.isdigit() else None
    server = RedisServer(
        data.path,
        port=port if port is not None and _port_free(port) else None,
        appendonly=True,
        settings=SERVER_SETTINGS,
        preexec_fn=child_setup(),
    )
    server.start()
    assert server.pid is not None
    data.write("port", str(server.port))
    data.write("server.pid", str(server.pid))
    data.write("url", server.url)
    return server


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the server binds: connections of a previous run in TIME_WAIT do not hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _runs_in(pid: int, directory: Path) -> bool:
    """Whether process `pid` is alive (not a zombie) and works in `directory`. The server changes
    into its --dir; its command line cannot tell, as the server rewrites it into a title."""
    try:
        if sys.platform.startswith("linux"):
            return os.readlink(f"/proc/{pid}/cwd") == str(directory)
        listing = subprocess.run(
            ["lsof", "-a", "-p", str(pid), "-d", "cwd", "-Fn"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return f"n{directory}" in listing.splitlines()
    except OSError:
        return False
