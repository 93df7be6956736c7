#!/usr/bin/env python3
"""Reads snapshots of the scheduler's status (nvsharectl --json saved to a
file) for tests/quota/t_quota.sh. Times are CLOCK_MONOTONIC milliseconds, the
clock of quota_app's samples (the snapshot's now_ns).

  qstat.py now SNAP                the snapshot's time (ms)
  qstat.py boundary SNAP MS        the first quota window boundary >= MS (ms)
  qstat.py get SNAP PID KEY        PID's quota KEY on GPU 0 (e.g. billed_ns,
                                   limit, effective_pct); "none" if absent
  qstat.py billed SNAP1 SNAP2 PID  PID's billed share (%) of [now1, now2]
  qstat.py billed_ms SNAP PID      PID's billed time so far (ms)
  qstat.py away EVENTS PID FROM TO percent of [FROM, TO] (ms) in which PID
                                   did not ask for the lock: from each of its
                                   releases (idle, early, dropped...) to its
                                   next request (the scheduler's events)
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def quota(snap, pid):
    for c in snap.get("clients", []):
        if c.get("pid") == pid:
            for g in c.get("gpus", []):
                if g.get("gpu") == 0:
                    return g.get("quota")
    return None


def now_ms(snap):
    return snap["now_ns"] / 1e6


def away(events, pid, t1, t2):
    """A client starved of CPU asks late and so cannot be billed its whole
    quota: that time is the client's, not the scheduler's error."""
    gone, total = None, 0.0
    with open(events) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line another scheduler is still writing
            if e.get("pid") != pid:
                continue
            t = e["mono_ns"] / 1e6
            if e["event"] == "lock_released" and gone is None:
                gone = t
            elif e["event"] in ("req_lock", "lock_ok") and gone is not None:
                total += max(0.0, min(t, t2) - max(gone, t1))
                gone = None
    if gone is not None:
        total += max(0.0, t2 - max(gone, t1))
    return 100.0 * total / (t2 - t1) if t2 > t1 else 0.0


def main(argv):
    cmd = argv[1]
    if cmd == "now":
        print("%.3f" % now_ms(load(argv[2])))
    elif cmd == "boundary":
        s = load(argv[2])
        want = float(argv[3])
        # Any client's quota view has the GPU's window; the window started
        # window_elapsed_ns before the snapshot.
        q = next((quota(s, c["pid"]) for c in s["clients"] if quota(s, c["pid"])), None)
        if not q or not q.get("window_elapsed_ns"):
            print("none")
            return 0
        w = q["window_ns"] / 1e6
        b = now_ms(s) - q["window_elapsed_ns"] / 1e6
        while b < want:
            b += w
        print("%.3f" % b)
    elif cmd == "get":
        q = quota(load(argv[2]), int(argv[3]))
        print("none" if q is None or argv[4] not in q else q[argv[4]])
    elif cmd == "billed":
        a, b, pid = load(argv[2]), load(argv[3]), int(argv[4])
        qa, qb = quota(a, pid), quota(b, pid)
        dt = now_ms(b) - now_ms(a)
        if qa is None or qb is None or dt <= 0:
            print("nan")
        else:
            print("%.2f" % ((qb["billed_ns"] - qa["billed_ns"]) / 1e6 / dt * 100))
    elif cmd == "billed_ms":
        q = quota(load(argv[2]), int(argv[3]))
        print("nan" if q is None else "%.3f" % (q["billed_ns"] / 1e6))
    elif cmd == "away":
        print("%.2f" % away(argv[2], int(argv[3]), float(argv[4]), float(argv[5])))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
