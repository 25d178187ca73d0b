"""How `cronq run` starts its child processes, so that they stop in order and never outlive it.

Each child gets its own session: a Ctrl-C at the terminal then reaches `cronq run` alone, which
stops the workers first (they finish running targets, which needs Redis) and the server last. Had
the terminal's SIGINT reached every process at once, the server would be gone under the workers,
and RQ would take our follow-up SIGTERM as a second signal (a cold shutdown that kills the work
horse). On Linux each child also asks the kernel for SIGTERM when `cronq run` dies without
cleaning up (`prctl(PR_SET_PDEATHSIG)`), so even `kill -9` leaves no orphans; elsewhere a server
left behind is found and stopped by the next `cronq run` (see `embedded`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["child_setup"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up in the parent: the child may only make plain calls before exec."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()


def child_setup() -> Callable[[], None]:
    """A `preexec_fn`: own session; on Linux, SIGTERM when the calling process dies."""
    parent = os.getpid()

    def setup() -> None:
        os.setsid()
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the request took effect
                os._exit(1)

    return setup
