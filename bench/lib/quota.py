"""Scenario quota: compute caps set at run time with nvsharectl on one
scheduler; two workers spin, and each case measures their shares of GPU
time against their caps (docs/quotas.md). The issue's other cases are in
quota_more.py, the report section in quota_report.py."""
import subprocess
import threading
import time

import config
from benchlib import median
from config import QUOTA_LEAD, QUOTA_MEASURE, QUOTA_PAIRS, QUOTA_REPS, QUOTA_SINGLES, QUOTA_SKIP
from nvsharectl import ctl_core_limit, sched_held_ns
from orchestration import pair_call
from progress import left, say
from quota_more import quota_more
from quota_spin import as_pct, gpu_share, spin_cmd, spin_rate, wait_until


def run_quota(C, R):
    c = C.get("quota")
    q = R["quota"] = {"cases": [], "timing": config.QUOTA_TIMING, "reps": QUOTA_REPS}
    if not c or not c.usable():
        q["error"] = (c.error if c else None) or "configuration unusable"
        return
    try:
        pids = [r["pid"] for r in pair_call(c, [{"op": "hello"}, {"op": "hello"}])]

        def spin(caps):
            """Returns (work rates, GPU-time shares, scheduler hold shares),
            one entry per worker (None where it did not run)."""
            for pid, cap in zip(pids, caps):
                ctl_core_limit(c, pid, cap if cap is not None else 100)
            t0 = time.monotonic() + QUOTA_LEAD
            a, b = t0 + QUOTA_SKIP, t0 + QUOTA_SKIP + QUOTA_MEASURE
            cmd = spin_cmd(t0, b + 0.2)
            samples = []

            def sample_at(ts):  # the scheduler's hold counters at a and b
                for t in ts:
                    wait_until(t)
                    try:
                        samples.append(sched_held_ns(c))
                    except (OSError, subprocess.SubprocessError):
                        return
            th = threading.Thread(target=sample_at, args=([a, b],), daemon=True)
            th.start()
            try:
                rs = pair_call(c, [cmd if cap is not None else None for cap in caps],
                               timeout=QUOTA_LEAD + QUOTA_MEASURE + 60)
            except RuntimeError as ex:
                if cmd["timing"] != "cupti" or "timing_used" in q or not c.usable():
                    raise
                # No CUPTI under this build of PyTorch: CUDA events instead.
                say("quota: CUPTI timing failed (%s); falling back to CUDA events" % ex)
                config.QUOTA_TIMING, config.QUOTA_SYNC = "events", 1
                q["timing"], q["cupti_error"] = "events", str(ex)[:300]
                th.join(15)
                return spin(caps)
            th.join(15)
            rates = [spin_rate(r["marks"], a, b) if r else None for r in rs]
            gpu = [gpu_share(r, a, b) for r in rs]
            for r in rs:
                if r:
                    q["timing_used"] = r.get("timing", "events")
                    late = r["marks"][0][0] - t0
                    q["late_max"] = max(q.get("late_max", 0.0), late)
                    if r.get("kernels") and r["marks"][-1][1]:
                        # GPU activity records per matmul: the same in every
                        # run unless CUPTI dropped records.
                        q.setdefault("records_per_mm", []).append(r["kernels"] / r["marks"][-1][1])
            held = [None, None]
            if len(samples) == 2 and samples[1][0] > samples[0][0]:
                (ta, ha), (tb, hb) = samples
                held = [(hb[p] - ha[p]) / 1e9 / (tb - ta) if p in ha and p in hb and cap is not None
                        else None for p, cap in zip(pids, caps)]
            q["event_outliers"] = q.get("event_outliers", 0) + sum(r.get("outliers", 0) for r in rs if r)
            return rates, gpu, held

        # Discarded: the first profiled spin of a worker starts ~2.5 s late
        # (CUPTI starting up), which ate into the first measured interval.
        t0 = time.monotonic() + 0.5
        pair_call(c, [spin_cmd(t0, t0 + 1.0)] * 2, timeout=QUOTA_LEAD + QUOTA_MEASURE + 60)
        base, base_gpu, _ = spin([100, None])
        base, base_gpu = base[0], base_gpu[0]
        unc, _, _ = spin([100, 100])
        q["base"], q["base_gpu_share"], q["uncapped_pair"] = base, base_gpu, sum(x or 0 for x in unc)
        if not base:
            raise RuntimeError("no progress measured alone")

        def med(xs):
            xs = [x for x in xs if x is not None]
            return median(xs) if xs else None
        cases = [[cap] for cap in QUOTA_SINGLES] + [list(p) for p in QUOTA_PAIRS]
        res = {i: [] for i in range(len(cases))}
        for rep in range(QUOTA_REPS):  # cases interleaved: drift spreads over all
            for i, caps in enumerate(cases):
                if left() < QUOTA_LEAD + QUOTA_SKIP + QUOTA_MEASURE + 20:
                    q["error"] = "deadline: stopped after %d repetition(s)" % rep
                    break
                r, g, h = spin(caps + [None] * (2 - len(caps)))
                res[i].append({"rates": r[:len(caps)], "shares": [as_pct(x) for x in g[:len(caps)]],
                               "held": [as_pct(x) for x in h[:len(caps)]]})
            if q.get("error"):
                break
        for i, caps in enumerate(cases):
            reps = res[i]
            if not reps:
                continue
            name = ("single %d%%" % caps[0]) if len(caps) == 1 else "pair %d%% + %d%%" % tuple(caps)
            cs = {"name": name, "caps": caps, "reps": reps,
                  "shares": [med([x["shares"][j] for x in reps]) for j in range(len(caps))],
                  "held": [med([x["held"][j] for x in reps]) for j in range(len(caps))],
                  "work_shares": [100.0 * median([x["rates"][j] or 0 for x in reps]) / base
                                  for j in range(len(caps))]}
            if len(caps) == 2 and q["uncapped_pair"]:
                cs["total_ratio"] = median([sum(y or 0 for y in x["rates"]) for x in reps]) / q["uncapped_pair"]
            q["cases"].append(cs)
        quota_more(c, pids, q, spin)
        for pid in pids:
            ctl_core_limit(c, pid, 100)
    except RuntimeError as ex:
        q["error"] = str(ex)
