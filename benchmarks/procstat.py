"""Process CPU from /proc and a percentile: what the benchmark scripts measure with."""

from __future__ import annotations

import collections
import math
import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    """Every live descendant of pid (by scanning /proc for parent ids)."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        parents[ppid].append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pid: int, *, system_only: bool = False) -> float:
    """utime + stime + cutime + cstime of one process, in seconds (0 once it is gone); with
    system_only, stime + cstime (time in the kernel)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): utime..cstime are fields 14..17.
    if system_only:
        return (int(fields[12]) + int(fields[14])) / CLK_TCK
    return sum(int(v) for v in fields[11:15]) / CLK_TCK


def tree_cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds of each given process and each of its live descendants."""
    every = list(pids)
    for pid in pids:
        every += children_of(pid)
    return {pid: cpu_seconds(pid) for pid in every}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
