"""The quota scenario's other cases (the issue's list, once each), which
run_quota (quota.py) runs after the capped cases with its spin()."""
import os
import threading
import time

import config
from benchlib import Child
from config import (PRELOAD, PY, QUOTA_LEAD, QUOTA_MEASURE, QUOTA_SKIP, QUOTA_WINDOW_MS, ROOT, WORKER,
                    WORKER_START_TIMEOUT)
from nvsharectl import ctl_core_limit, ctl_mem_limit
from orchestration import pair_call
from progress import left
from quota_spin import as_pct, gpu_share, spin_cmd, wait_until


def quota_more(c, pids, q, spin):
    """The issue's other cases, once each: a limited client beside an
    unlimited one, limits summing over 100 with an idle limited client
    attached, a live change mid-run, a memory limit lowered below use and
    removed."""
    more = q["more"] = []

    try:
        _, g, h = spin([30, 100])
        more.append({"name": "30% beside an unlimited client", "targets": [30, None],
                     "shares": [as_pct(g[0]), as_pct(g[1])], "held": [as_pct(h[0]), as_pct(h[1])],
                     "note": "unlimited one not starved: >= 63%", "floor": [None, 63.0]})
    except RuntimeError as ex:
        more.append({"name": "30% beside an unlimited client", "error": str(ex)})

    # A third client with a 50 % limit that attaches, runs one kernel and
    # idles: 70 + 60 oversubscribe, the idle one must not count.
    idle = None
    try:
        if not config.FAKE:
            e = dict(os.environ)
            e.pop("LD_PRELOAD", None)
            argv = ["timeout", "-k", "5", str(int(max(60, left()))), "env", "LD_PRELOAD=" + PRELOAD,
                    "NVSHARE_SOCK_DIR=" + c.sock_dir, "NVSHARE_GPU_CORE_LIMIT=50", PY, "-u", WORKER]
            idle = Child("quota-idle", argv, e, os.path.join(config.LOGDIR, "worker-quota-idle.log"),
                         pipe=True, cwd=ROOT)
            with open(os.path.join(config.LOGDIR, "bench.pids"), "a") as f:
                f.write("%d\n" % idle.pid)
            idle.send({"op": "hello"})
            if not idle.recv(WORKER_START_TIMEOUT).get("ok"):
                raise RuntimeError("idle client did not start")
        _, g, h = spin([70, 60])
        more.append({"name": "70% + 60% with an idle 50% client attached", "targets": [53.85, 46.15],
                     "shares": [as_pct(g[0]), as_pct(g[1])], "held": [as_pct(h[0]), as_pct(h[1])],
                     "note": "scaled by 100/130; the idle one left out"})
    except RuntimeError as ex:
        more.append({"name": "70% + 60% with an idle 50% client attached", "error": str(ex)})
    finally:
        if idle:
            idle.stop()

    # Live: 60 % set, then 30 % mid-run; in force from the next window.
    try:
        ctl_core_limit(c, pids[0], 60)
        ctl_core_limit(c, pids[1], 100)
        t0 = time.monotonic() + QUOTA_LEAD
        a1, b1 = t0 + QUOTA_SKIP, t0 + QUOTA_SKIP + QUOTA_MEASURE
        after_skip = float(QUOTA_WINDOW_MS) / 1000.0 + QUOTA_SKIP
        until = b1 + after_skip + QUOTA_MEASURE + 0.3
        tc = []

        def change():
            wait_until(b1)
            ctl_core_limit(c, pids[0], 30)
            tc.append(time.monotonic())
        th = threading.Thread(target=change, daemon=True)
        th.start()
        r = pair_call(c, [spin_cmd(t0, until), None], timeout=until - time.monotonic() + 60)[0]
        th.join(15)
        if not tc:
            raise RuntimeError("the live change was not made")
        a2 = tc[0] + after_skip
        more.append({"name": "live change 60% -> 30% (nvsharectl mid-run)", "targets": [60, 30],
                     "shares": [as_pct(gpu_share(r, a1, b1)), as_pct(gpu_share(r, a2, a2 + QUOTA_MEASURE))],
                     "note": "one worker: %.0f s before the change, %.0f s from %.1f s after it" % (
                         QUOTA_MEASURE, QUOTA_MEASURE, after_skip)})
    except RuntimeError as ex:
        more.append({"name": "live change 60% -> 30%", "error": str(ex)})

    # Memory: 1 GiB held, limit lowered to 768 MiB, then removed.
    m = q["mem"] = {}
    try:
        ctl_core_limit(c, pids[0], 100)

        def step(action, mib=0):
            return pair_call(c, [{"op": "mem", "action": action, "mib": mib}, None])[0]
        r1 = step("alloc", 1024)
        ctl_mem_limit(c, pids[0], "768Mi")
        time.sleep(0.5)
        r2 = step("alloc", 256)
        ctl_mem_limit(c, pids[0], "none")
        time.sleep(0.5)
        r3 = step("alloc", 256)
        step("free_all")
        mib = 1 << 20
        m.update({"first": r1, "lowered": r2, "removed": r3})
        m["ok"] = bool(r1["allocated"] and not r2["allocated"] and r2["total"] == 768 * mib
                       and r3["allocated"] and r3["total"] > 768 * mib) or config.FAKE
        m["text"] = ("1024 MiB allocated (%s); limit lowered to 768 MiB: mem_get_info total %d MiB, "
                     "256 MiB more -> %s; limit removed: 256 MiB -> %s, total %d MiB" % (
                         "ok" if r1["allocated"] else "failed", r2["total"] // mib,
                         "OutOfMemoryError" if not r2["allocated"] else "allocated (wrong)",
                         "allocated" if r3["allocated"] else "failed (wrong)", r3["total"] // mib))
    except RuntimeError as ex:
        m.update({"ok": False, "text": "failed: %s" % ex})
