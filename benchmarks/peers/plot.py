"""Lag distributions of the precision runs: python plot.py RESULTS_DIR OUT.png

Reads RESULTS_DIR/precision-SYSTEM.json (written by `harness.py --json`) and draws one empirical
CDF of lag (user function start - intended fire second) per system; `rq-floor` (dashed) is not
a peer but the floor of any scheduler on the same RQ workers (rq_floor.py).
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SYSTEMS = ("cronq", "rq-floor", "rq-cron", "rq-scheduler", "apscheduler", "redbeat")

directory, out = Path(sys.argv[1]), Path(sys.argv[2])
figure, axis = plt.subplots(figsize=(8, 4.5))
for system in SYSTEMS:
    path = directory / f"precision-{system}.json"
    if not path.exists():
        continue
    result = json.loads(path.read_text())
    lags = sorted(x * 1000 for x in result["lags"])
    if not lags:
        continue
    ys = [(i + 1) / len(lags) for i in range(len(lags))]
    label = (
        f"{system}: p50 {result['lag_p50_ms']:.0f} / p99 {result['lag_p99_ms']:.0f} ms, "
        f"misses {result['misses']}, dups {result['duplicates']}"
    )
    style = {"linestyle": "--", "color": "grey"} if system == "rq-floor" else {}
    axis.plot(lags, ys, label=label, **style)
axis.set_xlabel("lag: user function start - intended fire time (ms)")
axis.set_ylabel("fraction of fire times")
axis.set_title("Workload 1: 100 jobs every second, 120 s, 2 cores (first run per fire time)")
axis.grid(alpha=0.3)
axis.legend(fontsize=8, loc="lower right")
figure.tight_layout()
figure.savefig(out, dpi=110)
print(out)
