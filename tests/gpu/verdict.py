"""Turns the JSON a case wrote into one verdict line for tests/gpu/run:

    PASS <description with the measured figures>
    FAIL <description>

No GPU library is imported: this runs in the runner's own process.
Usage: verdict.py <case> args...   (see the functions below)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import read_json  # noqa: E402


def out(ok, desc):
    print(("PASS " if ok else "FAIL ") + desc)
    return 0


def load(path):
    try:
        return read_json(path)
    except Exception as e:  # missing or truncated: the case crashed
        return {"_error": "%s: %s" % (os.path.basename(path), e)}


def v_train(native, preload):
    a, b = load(native), load(preload)
    for r in (a, b):
        if "_error" in r:
            return out(False, "training losses: no result (%s)" % r["_error"])
    la = [float(x) for x in a["losses"]]
    lb = [float(x) for x in b["losses"]]
    if len(la) != len(lb) or not la:
        return out(False, "training losses: %d native vs %d preload steps" % (len(la), len(lb)))
    exact = a["losses"] == b["losses"] and a["checksum"] == b["checksum"]
    rel = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(la, lb))
    desc = ("training %d steps: losses %s (max rel diff %.3g, final loss %.6f, "
            "native %.2fs, preload %.2fs)" % (
                len(la), "bitwise identical incl. parameter checksum" if exact
                else "NOT bitwise identical, compared within 1e-6 relative", rel, la[-1],
                a.get("elapsed_s", 0), b.get("elapsed_s", 0)))
    return out(exact or rel <= 1e-6, desc)


def v_graph(path, label):
    r = load(path)
    if "_error" in r:
        return out(False, "CUDA graph %s: no result (%s)" % (label, r["_error"]))
    return out(r.get("ok"), "CUDA graph capture+replay %s: %d replays, max |graph-eager| %.3g, %s" % (
        label, r.get("replays", 0), r.get("max_abs_diff", -1),
        "bitwise equal" if r.get("bitwise") else "not bitwise equal"))


def v_cupy(path):
    r = load(path)
    if "_error" in r:
        return out(False, "CuPy: no result (%s)" % r["_error"])
    e = r.get("errors", {})
    return out(r.get("ok"), "CuPy %s elementwise/matmul/reduction: errors %s" % (
        r.get("cupy", "?"), ", ".join("%s %.2g" % kv for kv in sorted(e.items()))))


def v_jax(path):
    r = load(path)
    if "_error" in r:
        return out(False, "JAX: no result (%s)" % r["_error"])
    return out(r.get("ok"), "JAX %s jit matmul on %s: rel err %.2g" % (
        r.get("jax", "?"), r.get("device", "?"), r.get("rel_err", -1)))


def v_memlimit(path, smi_total_mib, limit_mib):
    r = load(path)
    limit_mib = int(limit_mib)
    if "_error" in r:
        return out(False, "memory limit: no result (%s)" % r["_error"])
    try:
        smi = int(float(smi_total_mib))
    except ValueError:
        smi = None
    ok = bool(r.get("ok")) and smi == limit_mib
    return out(ok, ("limit %d MiB: mem_get_info total %.0f MiB (free %.0f MiB), nvidia-smi "
                    "memory.total %s MiB, %d MiB alloc -> %s, then 512 MiB %s") % (
        limit_mib, r["total"] / 2**20, r["free"] / 2**20, smi_total_mib, 3 * limit_mib // 2,
        r.get("over_alloc"), "works" if r.get("after_ok") else "FAILS (%s)" % r.get("after_err", "")))


def v_managed(native, preload):
    a, b = load(native), load(preload)
    for r in (a, b):
        if "_error" in r:
            return out(False, "managed allocations: no result (%s)" % r["_error"])
    ok = a.get("runtime_type") == 2 and b.get("runtime_type") == 3
    return out(ok, ("torch.empty pointer type: native %s, preload %s "
                    "(driver IS_MANAGED native %s, preload %s)") % (
        a.get("runtime_type_name"), b.get("runtime_type_name"),
        a.get("driver_is_managed"), b.get("driver_is_managed")))


def count(files, pattern):
    rx = re.compile(pattern)
    n = 0
    for f in files:
        try:
            with open(f, errors="replace") as fh:
                n += sum(1 for line in fh if rx.search(line))
        except OSError:
            pass
    return n


def overlap(a, b):
    lo, hi = max(a["start"], b["start"]), min(a["end"], b["end"])
    shorter = min(a["end"] - a["start"], b["end"] - b["start"])
    return max(0.0, hi - lo) / shorter if shorter > 0 else 0.0


def v_pair(kind, ja, jb, sched_log, lock_ok_re, drop_re, serial_re, client_lock_re, *client_logs):
    a, b = load(ja), load(jb)
    for r in (a, b):
        if "_error" in r:
            return out(False, "two jobs (%s): no result (%s)" % (kind, r["_error"]))
    correct = bool(a.get("ok")) and bool(b.get("ok"))
    grants = count([sched_log], lock_ok_re)
    client_grants = count(list(client_logs), client_lock_re)
    drops = count([sched_log], drop_re)
    serial = count([sched_log], serial_re)
    ov = overlap(a, b)
    makespan = max(a["end"], b["end"]) - min(a["start"], b["start"])
    figs = ("%.0f+%.0f MiB, makespan %.2fs (job times %.2fs/%.2fs), overlap %.0f%%, "
            "LOCK_OK %d (client logs %d), DROP_LOCK %d, serialized-mode lines %d, results %s") % (
        a["mib"], b["mib"], makespan, a["elapsed_s"], b["elapsed_s"], 100 * ov, grants,
        client_grants, drops, serial, "correct" if correct else "WRONG")
    if kind == "fit":
        ok = correct and grants == 0 and ov >= 0.5
        return out(ok, "two jobs that fit, auto: run concurrently; " + figs)
    ok = correct and max(grants, client_grants) >= 2 and serial >= 1
    return out(ok, "two jobs over capacity, auto: serialize; " + figs)


def v_idle(ja, jb, limit_ms):
    a, b = load(ja), load(jb)
    for r in (a, b):
        if "_error" in r:
            return out(False, "idle release: no result (%s)" % r["_error"])
    ms = (b["t_first"] - a["t_last"]) * 1000.0
    waited = (b["t_first"] - b["t_queued"]) * 1000.0
    return out(ms < float(limit_ms), ("idle release under on: A's last kernel -> B's first "
                                      "progress %.1f ms (limit %s ms; B waited %.0f ms in total)") % (
        ms, limit_ms, waited))


def v_survive(job, rc, killed_at_s):
    r = load(job)
    if "_error" in r:
        return out(False, "scheduler killed mid-job: job left no result, exit %s (%s)" % (rc, r["_error"]))
    ok = r.get("ok") and rc == "0"
    after = r["end"] - float(killed_at_s) if killed_at_s not in ("", "none") else float("nan")
    return out(ok, ("scheduler SIGKILLed mid-job: job exit %s, result %s, ran %.2fs "
                    "(%.2fs of it after the kill)") % (rc, "correct" if r.get("ok") else "WRONG",
                                                      r["elapsed_s"], after))


def v_multi_gpu(sched_log, ctl_json, *jobs):
    """Case 9b: jobs 0a, 0b on GPU 0 (over capacity), 1a, 1b on GPU 1 (fit)."""
    rs = [load(j) for j in jobs]
    for r in rs:
        if "_error" in r:
            return out(False, "per-GPU independence: no result (%s)" % r["_error"])
    correct = all(r.get("ok") for r in rs)
    ser0 = count([sched_log], r"GPU_MODE gpu=0 serialized=1")
    ser1 = count([sched_log], r"GPU_MODE gpu=1 serialized=1")
    grants0 = count([sched_log], r"LOCK_OK client=\d+ pid=\d+ gpu=0 ")
    grants1 = count([sched_log], r"LOCK_OK client=\d+ pid=\d+ gpu=1 ")
    ov0, ov1 = overlap(rs[0], rs[1]), overlap(rs[2], rs[3])
    span = lambda a, b: max(a["end"], b["end"]) - min(a["start"], b["start"])  # noqa: E731
    st = load(ctl_json)
    gpus = st.get("gpus", []) if "_error" not in st else []
    uuids = {g.get("uuid") for g in gpus}
    ok = (correct and ser0 >= 1 and ser1 == 0 and grants0 >= 2 and grants1 == 0 and
          ov1 >= 0.5 and len(gpus) >= 2 and len(uuids) == len(gpus))
    return out(ok, ("per-GPU independence: GPU 0 serialized (mode lines %d, LOCK_OK %d, overlap "
                    "%.0f%%, makespan %.2fs) while GPU 1 ran together (serialized lines %d, LOCK_OK %d, "
                    "overlap %.0f%%, makespan %.2fs); nvsharectl --json lists %d GPUs; results %s") % (
        ser0, grants0, 100 * ov0, span(rs[0], rs[1]), ser1, grants1, 100 * ov1,
        span(rs[2], rs[3]), len(gpus), "correct" if correct else "WRONG"))


def v_both(path, sched_log):
    """Case 9c: one process on both GPUs while GPU 0 is serialized."""
    r = load(path)
    if "_error" in r:
        return out(False, "one process on both GPUs: no result (%s)" % r["_error"])
    g0 = count([sched_log], r"ATTACH_GPU client=\d+ pid=%d gpu=0 " % r["pid"])
    g1 = count([sched_log], r"ATTACH_GPU client=\d+ pid=%d gpu=1 " % r["pid"])
    ser0 = count([sched_log], r"GPU_MODE gpu=0 serialized=1")
    ok = bool(r.get("ok")) and g0 == 1 and g1 == 1 and ser0 >= 1
    return out(ok, ("one process on both GPUs while GPU 0 is serialized (mode lines %d): attached "
                    "to GPU 0 and 1 (%d/%d), %.2fs, no deadlock, results %s") % (
        ser0, g0, g1, r["elapsed_s"], "correct" if r.get("ok") else "WRONG"))


def v_nccl(n0, n1, p0, p1):
    """Case 9d: NCCL all-reduce, native ranks beside nvshare ranks."""
    rs = [load(x) for x in (n0, n1, p0, p1)]
    for r in rs:
        if "_error" in r:
            return out(False, "NCCL all-reduce: no result (%s)" % r["_error"])
    correct = all(r.get("ok") for r in rs)
    tn = max(rs[0]["elapsed_s"], rs[1]["elapsed_s"])
    tp = max(rs[2]["elapsed_s"], rs[3]["elapsed_s"])
    return out(correct, ("NCCL all-reduce of %d MiB x %d between the two GPUs: sum %s, native "
                         "%.3fs, nvshare %.3fs (%.2fx)") % (
        rs[0]["mib"], rs[0]["iters"], "correct" if correct else "WRONG", tn, tp,
        tp / tn if tn > 0 else float("nan")))


CASES = {"train": v_train, "graph": v_graph, "cupy": v_cupy, "jax": v_jax,
         "memlimit": v_memlimit, "managed": v_managed, "pair": v_pair, "idle": v_idle,
         "survive": v_survive, "multi_gpu": v_multi_gpu, "both": v_both,
         "nccl": v_nccl}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CASES:
        sys.exit("usage: verdict.py {%s} args..." % ",".join(sorted(CASES)))
    try:
        sys.exit(CASES[sys.argv[1]](*sys.argv[2:]))
    except Exception as e:  # never let a verdict crash silently
        print("FAIL %s: verdict error %s: %s" % (sys.argv[1], type(e).__name__, e))
