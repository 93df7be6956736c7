"""The quota scenario's measurement: the spin command a worker runs, and
its reply turned into rates and shares of GPU time over an interval."""
import time

import config
from config import QUOTA_MM_N


def wait_until(t):
    """Sleeps until time.monotonic() reaches t (2 ms steps)."""
    while time.monotonic() < t:
        time.sleep(min(0.002, max(0.0, t - time.monotonic())))


def as_pct(x):
    """A fraction as percent; None stays None."""
    return 100.0 * x if x is not None else None


def spin_cmd(start_at, until):
    """The quota scenario's spin command for one worker."""
    return {"op": "spin", "start_at": start_at, "until": until, "n": QUOTA_MM_N,
            "sync_every": config.QUOTA_SYNC, "timing": config.QUOTA_TIMING}


def gpu_share(r, a, b):
    """A spin reply's share of GPU time over [a, b]: from the CUPTI busy
    intervals, or the event-timed marks (None without a reply)."""
    if not r:
        return None
    return busy_share(r["busy"], a, b) if "busy" in r else spin_rate(r["marks"], a, b, 2)


def spin_rate(marks, a, b, field=1):
    """Per second between the first mark >= a and the last <= b: steps
    (field 1), or GPU seconds of the worker's kernels (field 2: its share of
    GPU time)."""
    xs = [m for m in marks if a <= m[0] <= b]
    if len(xs) < 2 or xs[-1][0] <= xs[0][0] or len(xs[0]) <= field:
        return None
    return (xs[-1][field] - xs[0][field]) / (xs[-1][0] - xs[0][0])


def busy_share(busy, a, b):
    """Share of [a, b] covered by the busy intervals."""
    tot = 0.0
    for s, e in busy:
        tot += max(0.0, min(e, b) - max(s, a))
    return tot / (b - a)
