"""The watchdog loop: any number of instances, one sweep per interval under a Redis lock.

The instance holding the lock sweeps once per interval and refreshes the lock as it goes; the
others try for it four times per interval, so when the holder dies one of them takes over about
one interval later. Every instance heartbeats into `{ns}:watchdogs`, which `cronq status` reads.
"""

from __future__ import annotations

import logging
import math
import threading
import uuid
from datetime import timedelta

from redis.exceptions import RedisError
from rq.scripts import acquire_or_refresh_lock

from cronq import metrics
from cronq.engine import Engine
from cronq.presence import beat
from cronq.watchdog.sweep import DEFAULT_GRACE, SweepReport, sweep

__all__ = ["DEFAULT_INTERVAL", "Watchdog"]

DEFAULT_INTERVAL = timedelta(seconds=60)
log = logging.getLogger("cronq.watchdog")


class Watchdog:
    def __init__(
        self,
        engine: Engine,
        *,
        interval: timedelta = DEFAULT_INTERVAL,
        grace: timedelta = DEFAULT_GRACE,
        name: str | None = None,
    ) -> None:
        self.engine = engine
        self.interval = interval
        self.grace = grace
        self.name = name or uuid.uuid4().hex
        self.lock_key = f"{engine.namespace}:watchdog:lock"
        self.registry_key = f"{engine.namespace}:watchdogs"

    def run(self, stopping: threading.Event) -> None:
        """Sweep while holding the lock, stand by otherwise, until `stopping` is set."""
        seconds = self.interval.total_seconds()
        while not stopping.is_set():
            try:
                self.heartbeat()
                report = self.sweep_if_leader()
                if report is not None:
                    self.log_report(report)
                    if (counts := metrics.active()) is not None:
                        counts.swept(self.engine.namespace, report)
                wait = seconds if report is not None else seconds / 4
            except RedisError as exc:
                log.warning("watchdog %s: Redis unavailable: %s", self.name, exc)
                wait = min(seconds, 5.0)
            except Exception:  # a bug must not end the repair loop in silence: log, go on
                log.exception("watchdog %s: sweep failed", self.name)
                wait = seconds
            stopping.wait(wait)

    def sweep_if_leader(self) -> SweepReport | None:
        ttl = max(math.ceil(self.interval.total_seconds() * 1.25), 1)
        outcome = acquire_or_refresh_lock(self.engine.connection, self.lock_key, self.name, ttl)
        if outcome == "taken":
            return None
        return sweep(self.engine, self.grace)

    def heartbeat(self) -> None:
        now = self.engine.clock().timestamp()
        beat(self.engine.connection, self.registry_key, self.name, now, self.ttl)

    @property
    def ttl(self) -> float:
        """A watchdog silent for this long is gone (it beats at least every interval)."""
        return 3 * self.interval.total_seconds()

    @staticmethod
    def log_report(report: SweepReport) -> None:
        """The sweep as a whole; each repair is logged by the engine as it is committed."""
        log.info(
            "watchdog sweep: %d lapsed, %d repairs, %d tasks returned, %.3fs",
            report.lapsed,
            len(report.repairs),
            report.returned_tasks,
            report.seconds,
            extra={
                "lapsed": report.lapsed,
                "repairs": len(report.repairs),
                "returned_tasks": report.returned_tasks,
                "seconds": round(report.seconds, 4),
            },
        )
