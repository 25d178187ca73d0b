"""The repair loop: feeds `watchdog fired` events to jobs whose WatchdogTimerTs has lapsed."""
