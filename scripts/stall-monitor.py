#!/usr/bin/env python3
"""Logs moments when this machine did not run a sleeping process on time.

    scripts/stall-monitor.py LOG [--period S] [--min-gap S]

Sleeps PERIOD (0.2 s) at a time and appends a line to LOG whenever one of
those sleeps took longer than MIN_GAP (1 s): the wall time it ended, how
long it took, and /proc/loadavg. A sleeper asks for microseconds of CPU, so
a gap of seconds means the whole machine stopped running ready processes
(host contention, a paused VM), which no test bound can allow for. The soak
(scripts/soak-tests.sh) runs it beside its rounds and names the stalls of a
failing round, so such a failure is told apart from a test's own defect.
Runs until killed.
"""
import argparse
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--period", type=float, default=0.2)
    ap.add_argument("--min-gap", type=float, default=1.0)
    a = ap.parse_args()
    prev = time.monotonic()
    while True:
        time.sleep(a.period)
        now = time.monotonic()
        gap = now - prev
        prev = now
        if gap <= a.min_gap:
            continue
        try:
            with open("/proc/loadavg") as f:
                load = " ".join(f.read().split()[:4])
        except OSError:
            load = "?"
        with open(a.log, "a") as f:
            f.write("%.3f %.2f %s\n" % (time.time(), gap, load))


if __name__ == "__main__":
    main()
