"""The repair loop: feeds `watchdog fired` events to jobs whose WatchdogTimerTs has lapsed."""

from cronq.watchdog.service import DEFAULT_INTERVAL, Watchdog
from cronq.watchdog.sweep import DEFAULT_GRACE, Repair, SweepReport, sweep

__all__ = ["DEFAULT_GRACE", "DEFAULT_INTERVAL", "Repair", "SweepReport", "Watchdog", "sweep"]
