"""nvshare benchmark orchestrator (run it through bench/run).

Starts one scheduler per nvshare configuration (private socket directories)
and two persistent GPU workers (bench/worker.py) per configuration, native
included; then runs the scenarios, interleaving configurations repetition by
repetition so that clock drift hits all of them alike; prints a Markdown
report, writes it to $BENCH_LOGDIR/bench.md (+ results.json) and into
docs/BENCHMARKS.md between <!-- bench:begin --> and <!-- bench:end -->.

This process never imports torch. See bench/README.md.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import (Child, cell_ratio, cell_time, fmt_ms, md_table, median,  # noqa: E402
                      pct, ratios, replace_section)

ROOT = os.path.dirname(HERE)


def env(name, default, conv=str):
    v = os.environ.get(name)
    return default if v is None or v == "" else conv(v)


# ===========================================================================
# Configuration. Assumptions about nvshare's interfaces are all here; check
# them against scheduler/settings.c, client/config.c, docs/ as they change.
BUILD = os.path.abspath(os.path.join(ROOT, env("NVS_BUILD", "build")))
LIB = os.path.join(BUILD, "libnvshare.so")
# What the nvshare workers get as LD_PRELOAD: the library, or (sanitizer
# build, tests/bench/t_selftest.sh) the ASan runtime and then the library.
PRELOAD = os.environ.get("BENCH_PRELOAD") or LIB
SCHED_BIN = os.path.join(BUILD, "nvshare-scheduler")
SCHED_LIBDIR = os.path.join(BUILD, "lib")  # LD_LIBRARY_PATH of the scheduler only
SCHED_LATENCY_BIN = os.path.join(BUILD, "bench", "sched_latency")
SCHED_LATENCY_ARGS = shlex.split(env("BENCH_SCHED_LATENCY_ARGS", ""))
SOCK_NAME = "scheduler.sock"  # in $NVSHARE_SOCK_DIR
# Scheduler settings by environment (scheduler/settings.c):
MODE_VAR, TQ_VAR, CAP_VAR = "NVSHARE_SCHED_MODE", "NVSHARE_TQ", "NVSHARE_GPU_CAPACITY"
# Several schedulers run at once: none may serve metrics on the shared port.
SCHED_COMMON_ENV = {"NVSHARE_METRICS_ENABLE": "0"}
# Swap (prefetch on hand-off) switch: BENCH_SWAP_OFF_ENV="VAR=value" forces
# one ("" disables the comparison); unset = look for an NVSHARE_*SWAP* or
# *PREFETCH* variable name inside the binaries and set it to 0.
SWAP_OFF_ENV = os.environ.get("BENCH_SWAP_OFF_ENV")
SWAP_NAME_RE = rb"NVSHARE_[A-Z0-9_]*(?:SWAP|PREFETCH)[A-Z0-9_]*"
# Time quanta per scheduler (NVSHARE_TQ syntax: bare number = seconds).
TQ_ON = env("BENCH_TQ_ON", "")                   # "" = scheduler default (30 s)
TQ_INTERACTIVE = env("BENCH_TQ_INTERACTIVE", "0.1")  # on-mode, interactive beside batch
TQ_PRESSURE = env("BENCH_TQ_PRESSURE", "1")      # auto over capacity: a few hand-offs
# Workload sizes (iterations tuned for ~0.6 s (small) / ~1.1 s (normal) per
# job alone on an H100; BENCH_TIME_SCALE multiplies every iteration count).
TIME_SCALE = env("BENCH_TIME_SCALE", 1.0, float)
# Overhead: configurations interleaved A B C C B A ..., one discarded
# repetition each; ~3 s per compute-bound repetition, because run-to-run
# spread of 0.66 s loops (±1 %) hid a 0.5 % target.
REPS_OVERHEAD = env("BENCH_REPS_OVERHEAD", 8, int)
REPS_PAIR = env("BENCH_REPS", 3, int)
OVERHEAD_MM_N = 8192                              # bf16 8192^3: ~1.65 ms each
OVERHEAD_MM_ITERS = env("BENCH_OVERHEAD_MM_ITERS", 1800, int)
OVERHEAD_LAUNCH_ITERS = 20000                     # adds on a 1-element tensor
SMALL_MIB, NORMAL_MIB = 512, 2048                 # working set per job
ITERS = {("add", "small"): 2400, ("mm", "small"): 60,
         ("add", "normal"): 1000, ("mm", "normal"): 14}
PINGPONG_HANDOFFS, PINGPONG_MARGIN = 10, 0.2
BURSTS, BURST_PERIOD, BURST_K, BURST_SIZE = 20, 0.3, 10, 1024
BATCH_N, LEAD_IN = 8192, 1.0
PRESSURE_CAP_FRACTION = 0.75                      # capacity = 0.75 x both working sets
BUDGET_PCT = env("BENCH_BUDGET_PCT", 25, int)      # of free GPU memory, all processes
DEADLINE = env("BENCH_DEADLINE", 285, float)       # seconds for the whole run
WORKER_START_TIMEOUT = 150
CMD_TIMEOUT = 120
# Compute quotas (scenario quota): caps set at run time with nvsharectl on one
# scheduler; a new cap is in force from the next window, then 2 windows are
# measured. Share = a worker's matmul rate / its rate alone uncapped.
CTL_BIN = os.path.join(BUILD, "nvsharectl")
QUOTA_WINDOW_MS = env("BENCH_QUOTA_WINDOW_MS", "2000")
# A change is made QUOTA_LEAD before the measured interval (a window and
# 0.1 s), which starts QUOTA_SKIP after that and lasts BENCH_QUOTA_MEASURE.
QUOTA_LEAD = float(QUOTA_WINDOW_MS) / 1000.0 + 0.1   # s
QUOTA_SKIP = 0.3
QUOTA_MEASURE = env("BENCH_QUOTA_MEASURE", 6.0, float)
QUOTA_SINGLES = [25, 50, 75]
QUOTA_PAIRS = [(30, 60), (25, 75), (50, 50)]
# GPU time from CUPTI (the kernels' own start/end, worker.py spin_cupti):
# batches of QUOTA_SYNC matmuls, one queued behind the running one. With
# BENCH_QUOTA_TIMING=events: CUDA events around each matmul, which needs a
# synchronize after every one (QUOTA_SYNC 1) so that no lock wait or
# in-flight cap falls between the events; the GPU then idles ~3 % of the time.
QUOTA_TIMING = env("BENCH_QUOTA_TIMING", "cupti")
QUOTA_MM_N = 8192                                  # bf16 8192^3 (~1.5 ms on an H100)
QUOTA_SYNC = env("BENCH_QUOTA_SYNC", 8 if QUOTA_TIMING == "cupti" else 1, int)
QUOTA_REPS = env("BENCH_QUOTA_REPS", 3, int)
# Targets from the issues: (key, text, limit).
TARGETS = [
    ("ovh_compute", "compute-bound overhead (auto) within 0.5% of native", 1.005),
    ("ovh_launch", "launch-bound overhead (auto) within 2% of native", 1.02),
    ("fit_auto", "two fitting jobs: auto makespan within 1% of native side by side", 1.01),
    ("idle", "idle release under on: last kernel -> other's progress < 50 ms (worst)", 0.050),
    ("first_burst", "interactive beside batch, auto: first burst within 100 ms", 0.100),
    ("holdup", "interactive beside batch, on: batch held up by an idle holder <= 50 ms (worst)", 0.050),
    ("quota_err", "compute caps (single 25/50/75, pairs 30+60, 25+75, 50+50): share within 2 points (worst)", 2.0),
    ("quota_total", "caps summing to 100: pair throughput >= 95% of the uncapped pair (worst)", 0.95),
    ("quota_more", "caps: 30% beside an unlimited client, 70% + 60% with an idle 50% client attached, "
     "live change 60% -> 30%: share within 2 points (worst)", 2.0),
    ("quota_mem", "memory limit lowered below use, then removed, at run time: enforced and shown", None),
]
LIMIT = {k: lim for k, _, lim in TARGETS}
SCENARIOS = ["overhead", "fit", "idle", "interactive", "pressure", "sched_latency", "quota"]
# ===========================================================================

T_START = time.monotonic()
TMPDIRS = []


def mktemp(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    TMPDIRS.append(d)
    return d


PY = env("PYTHON", "python3")
LOGDIR = os.path.abspath(env("BENCH_LOGDIR", os.path.join(BUILD, "bench-logs")))


def left():
    return DEADLINE - (time.monotonic() - T_START)


def say(*a):
    print("#", *a, flush=True)


class Config:
    """One way of running the jobs: native, or nvshare under one scheduler."""

    def __init__(self, name, label, sched_env=None, client_env=None):
        self.name, self.label = name, label
        self.preload = sched_env is not None
        self.sched_env = sched_env or {}
        self.client_env = client_env or {}
        self.sched = None
        self.sock_dir = None
        self.workers = []
        self.error = None
        self.info = {}

    def usable(self):
        return self.error is None and len(self.workers) == 2 and not any(w.dead for w in self.workers)


FAKE = os.environ.get("BENCH_FAKE") == "1"  # selftest: fake workers, no scheduler


def query_gpu(dry):
    if dry or FAKE:
        return {"name": "(dry run)", "driver": "?", "cuda": "?", "free_mib": 81000, "total_mib": 81559}
    idx = env("NVS_GPU_INDEX", "0")
    q = subprocess.run(["timeout", "30", "nvidia-smi", "-i", idx,
                        "--query-gpu=name,driver_version,memory.free,memory.total",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True)
    if q.returncode != 0 or not q.stdout.strip():
        sys.exit("nvidia-smi failed: %s %s" % (q.stdout, q.stderr))
    name, drv, free, total = [x.strip() for x in q.stdout.strip().splitlines()[0].split(",")]
    full = subprocess.run(["timeout", "30", "nvidia-smi"], capture_output=True, text=True).stdout
    m = re.search(r"CUDA Version:\s*([0-9.]+)", full)
    return {"name": name, "driver": drv, "cuda": m.group(1) if m else "?",
            "free_mib": int(float(free)), "total_mib": int(float(total))}


def detect_swap_env():
    if SWAP_OFF_ENV is not None:
        return dict([SWAP_OFF_ENV.split("=", 1)]) if "=" in SWAP_OFF_ENV else {}
    names = set()
    for f in (LIB, SCHED_BIN):
        try:
            with open(f, "rb") as fh:
                names.update(m.decode() for m in re.findall(SWAP_NAME_RE, fh.read()))
        except OSError:
            pass
    names = sorted(n for n in names if n != "NVSHARE_CLIENT_SCHED_SWAP_H")
    if "NVSHARE_SWAP" in names:  # docs/swap.md: prefetch on grant off
        return {"NVSHARE_SWAP": "0"}
    return {names[0]: "0"} if names else {}


# ----------------------------------------------------------------- startup

def tool_env(sock_dir):
    """Environment for our own binaries (scheduler, nvsharectl,
    sched_latency): their non-libc libraries travel in SCHED_LIBDIR; the
    GPU workers never get it."""
    e = dict(os.environ)
    e["LD_LIBRARY_PATH"] = SCHED_LIBDIR + (":" + e["LD_LIBRARY_PATH"] if e.get("LD_LIBRARY_PATH") else "")
    if sock_dir:
        e["NVSHARE_SOCK_DIR"] = sock_dir
    return e


def start_sched(cfg, dry, real=False):
    cfg.sock_dir = mktemp("nvs-bench-%s." % cfg.name)
    e = tool_env(cfg.sock_dir)
    e.update(SCHED_COMMON_ENV)
    e.update(cfg.sched_env)
    argv = ["timeout", "-k", "5", str(int(DEADLINE + 60)), SCHED_BIN]
    log = os.path.join(LOGDIR, "sched-%s.log" % cfg.name)
    if dry or (FAKE and not real and not os.path.exists(SCHED_BIN)):
        say("scheduler %-16s %s %s > %s" % (cfg.name, " ".join("%s=%s" % kv for kv in sorted(cfg.sched_env.items())),
                                            " ".join(argv), log))
        return
    cfg.sched = Child("sched-" + cfg.name, argv, e, log)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if os.path.exists(os.path.join(cfg.sock_dir, SOCK_NAME)):
            return
        if not cfg.sched.alive():
            break
        time.sleep(0.02)
    cfg.error = "scheduler did not start (see %s)" % os.path.basename(log)


def start_workers(cfg, dry):
    e = dict(os.environ)
    e["PYTHONUNBUFFERED"] = "1"
    e.pop("LD_PRELOAD", None)
    pre = []
    if cfg.preload:
        pre = ["LD_PRELOAD=" + PRELOAD, "NVSHARE_SOCK_DIR=" + (cfg.sock_dir or "?")]
    pre += ["%s=%s" % kv for kv in sorted(cfg.client_env.items())]
    for slot in range(2):
        name = "%s-%d" % (cfg.name, slot)
        argv = ["timeout", "-k", "5", str(int(DEADLINE + 60)), "env"] + pre + \
               [PY, "-u", os.path.join(HERE, "worker.py")]
        log = os.path.join(LOGDIR, "worker-%s.log" % name)
        if dry:
            say("worker    %-16s %s 2> %s" % (name, " ".join(argv), log))
            continue
        if cfg.error:
            return
        cfg.workers.append(Child(name, argv, e, log, pipe=True, cwd=ROOT))


def broadcast(cfgs, cmd, timeout):
    """Sends cmd to every worker of every usable config, then collects."""
    sent = []
    for c in cfgs:
        if not c.usable():
            continue
        for w in c.workers:
            try:
                w.send(cmd)
                sent.append((c, w))
            except RuntimeError as ex:
                c.error = str(ex)
    for c, w in sent:
        try:
            r = w.recv(timeout)
            if not r.get("ok"):
                c.error = "%s: %s failed: %s" % (w.name, cmd["op"], r.get("error"))
            elif cmd["op"] == "hello" and w is c.workers[0]:
                c.info = r
        except RuntimeError as ex:
            c.error = str(ex)


def pair_call(cfg, cmds, timeout=CMD_TIMEOUT):
    """Sends cmds[i] to worker i (None: skip) at once; returns the replies."""
    if not cfg.usable():
        raise RuntimeError(cfg.error or "%s unusable" % cfg.name)
    # Never wait past the run's deadline: a stuck worker costs its config,
    # not the report.
    timeout = max(5.0, min(timeout, left() - 5))
    for w, c in zip(cfg.workers, cmds):
        if c is not None:
            w.send(c)
    out = []
    for w, c in zip(cfg.workers, cmds):
        if c is None:
            out.append(None)
            continue
        try:
            r = w.recv(timeout)
        except RuntimeError as ex:
            cfg.error = str(ex)
            raise
        if not r.get("ok"):
            raise RuntimeError("%s: %s" % (w.name, r.get("error")))
        out.append(r)
    return out


# --------------------------------------------------------------- scenarios

def job_cmd(workload, size, mib, start_at, iters=None):
    return {"op": "job", "workload": workload, "mib": mib, "start_at": start_at,
            "iters": iters or max(1, int(ITERS[(workload, size)] * TIME_SCALE))}


def run_overhead(C, R, order):
    cfgs = [C[n] for n in order if n in C and C[n].usable()]
    res = {c.name: {"compute": [], "launch": []} for c in cfgs}
    cmds = {"compute": {"op": "overhead", "kind": "compute", "n": OVERHEAD_MM_N,
                        "iters": max(1, int(OVERHEAD_MM_ITERS * TIME_SCALE))},
            "launch": {"op": "overhead", "kind": "launch",
                       "iters": max(1, int(OVERHEAD_LAUNCH_ITERS * TIME_SCALE))}}
    for kind, cmd in cmds.items():
        for c in cfgs:  # one discarded repetition each
            try:
                pair_call(c, [cmd, None])
            except RuntimeError as ex:
                say("overhead warm-up on %s: %s" % (c.name, ex))
        for rep in range(REPS_OVERHEAD):
            seq = cfgs if rep % 2 == 0 else cfgs[::-1]
            for c in seq:
                try:
                    r = pair_call(c, [cmd, None])[0]
                    res[c.name][kind].append(r["seconds"])
                except RuntimeError as ex:
                    say("overhead %s on %s: %s" % (kind, c.name, ex))
    R["overhead"] = res


def run_pairs(C, names, workloads, mibs, sequential=()):
    """Two jobs at once (or one after the other for configs in sequential)
    per config, REPS_PAIR times, configs interleaved. Returns
    {workload: {config: [{"makespan", "correct", "jobs"}]}}."""
    out = {}
    items = [(n, C[n]) for n in names if n in C]
    for workload, size in workloads:
        mib = mibs[size]
        per = {n: [] for n, _ in items}
        for c in {id(c): c for _, c in items}.values():  # warm: one short job alone
            if c.usable():
                try:
                    pair_call(c, [job_cmd(workload, size, mib, 0, iters=2), None])
                except RuntimeError as ex:
                    say("warm %s/%s on %s: %s" % (workload, size, c.name, ex))
        for rep in range(REPS_PAIR):
            seq = items if rep % 2 == 0 else items[::-1]
            for n, c in seq:
                if not c.usable():
                    continue
                try:
                    if n in sequential:
                        t0 = time.monotonic() + 0.05
                        a = pair_call(c, [job_cmd(workload, size, mib, t0), None])[0]
                        b = pair_call(c, [None, job_cmd(workload, size, mib, 0)])[1]
                        jobs = [a, b]
                    else:
                        t0 = time.monotonic() + 0.15
                        jobs = pair_call(c, [job_cmd(workload, size, mib, t0)] * 2)
                    per[n].append({"makespan": max(j["end"] for j in jobs) - t0,
                                   "correct": all(j["correct"] for j in jobs),
                                   "jobs": [j["seconds"] for j in jobs]})
                except RuntimeError as ex:
                    say("%s/%s on %s: %s" % (workload, size, n, ex))
        out["%s-%s" % (workload, size) if size == "small" else workload] = per
    return out


def run_idle(C, R):
    c = C.get("on")
    if not c or not c.usable():
        R["idle"] = {"error": c.error if c else "no on config"}
        return
    d = mktemp("nvs-bench-pingpong.")
    cmd = {"op": "pingpong", "dir": d, "handoffs": PINGPONG_HANDOFFS, "margin": PINGPONG_MARGIN}
    try:
        a, b = pair_call(c, [dict(cmd, me=0), dict(cmd, me=1)])
    except RuntimeError as ex:
        R["idle"] = {"error": str(ex)}
        return
    last = dict(a["last"], **b["last"])
    first = dict(a["first"], **b["first"])
    lat = [first[h] - last[h] for h in sorted(last, key=int) if h in first]
    R["idle"] = {"latencies": lat}


def run_interactive(C, R, order):
    res = {}
    for n in order:
        c = C.get(n)
        if not c or not c.usable():
            res[n] = {"error": c.error if c else "not configured"}
            continue
        t0 = time.monotonic() + 0.5
        b0 = t0 + LEAD_IN
        until = b0 + BURSTS * BURST_PERIOD + 0.3
        try:
            batch, bursts = pair_call(c, [
                {"op": "batch", "n": BATCH_N, "start_at": t0, "until": until},
                {"op": "bursts", "start_at": b0, "n": BURSTS, "period": BURST_PERIOD,
                 "k": BURST_K, "size": BURST_SIZE}], timeout=CMD_TIMEOUT)
        except RuntimeError as ex:
            res[n] = {"error": str(ex)}
            continue
        steps, bl = batch["steps"], bursts["bursts"]
        lat = [e - s for s, e in bl]
        w0, w1 = bl[0][0], bl[-1][1]
        alone = [s for s in steps if t0 <= s[2] < w0]
        during = [s for s in steps if w0 <= s[2] <= w1]
        holdups = []
        for _, e in bl:
            later = [s[1] for s in steps if s[1] >= e]
            if later:
                holdups.append(min(later) - e)
        res[n] = {"burst_lat": lat, "first": lat[0] if lat else float("nan"),
                  "batch_alone_sps": len(alone) / max(1e-9, w0 - t0),
                  "batch_during_sps": len(during) / max(1e-9, w1 - w0),
                  "holdups": holdups}
    R["interactive"] = res


def ctl_set_client(cfg, pid, option, value):
    """nvsharectl --set-client PID OPTION VALUE on cfg's scheduler."""
    if FAKE:
        return  # fake workers never connect to the scheduler
    r = subprocess.run([CTL_BIN, "--set-client", str(pid), option, value],
                       env=tool_env(cfg.sock_dir), capture_output=True, text=True, timeout=10)
    if r.returncode:
        raise RuntimeError("nvsharectl --set-client %d %s %s: %s" % (
            pid, option, value, (r.stderr or r.stdout).strip()))


def ctl_core_limit(cfg, pid, core):
    ctl_set_client(cfg, pid, "--core-limit", str(core) if core < 100 else "default")


def ctl_mem_limit(cfg, pid, size):
    ctl_set_client(cfg, pid, "--memory-limit", size)


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
            "sync_every": QUOTA_SYNC, "timing": QUOTA_TIMING}


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


def sched_held_ns(cfg):
    """{pid: held_ns on its GPU} from `nvsharectl --json`, and the monotonic
    time of the sample (midpoint of the call)."""
    if FAKE:
        return time.monotonic(), {}
    t0 = time.monotonic()
    r = subprocess.run([CTL_BIN, "--json"], env=tool_env(cfg.sock_dir), capture_output=True,
                       text=True, timeout=10)
    t = (t0 + time.monotonic()) / 2
    held = {}
    try:
        for cl in json.loads(r.stdout).get("clients", []):
            gs = cl.get("gpus") or []
            if gs:  # a worker uses one GPU
                held[cl["pid"]] = gs[0].get("held_ns", 0)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return t, held


def busy_share(busy, a, b):
    """Share of [a, b] covered by the busy intervals."""
    tot = 0.0
    for s, e in busy:
        tot += max(0.0, min(e, b) - max(s, a))
    return tot / (b - a)


def run_quota(C, R):
    c = C.get("quota")
    q = R["quota"] = {"cases": [], "timing": QUOTA_TIMING, "reps": QUOTA_REPS}
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
                globals()["QUOTA_TIMING"], globals()["QUOTA_SYNC"] = "events", 1
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
        if not FAKE:
            e = dict(os.environ)
            e.pop("LD_PRELOAD", None)
            argv = ["timeout", "-k", "5", str(int(max(60, left()))), "env", "LD_PRELOAD=" + PRELOAD,
                    "NVSHARE_SOCK_DIR=" + c.sock_dir, "NVSHARE_GPU_CORE_LIMIT=50",
                    PY, "-u", os.path.join(HERE, "worker.py")]
            idle = Child("quota-idle", argv, e, os.path.join(LOGDIR, "worker-quota-idle.log"),
                         pipe=True, cwd=ROOT)
            with open(os.path.join(LOGDIR, "bench.pids"), "a") as f:
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
                       and r3["allocated"] and r3["total"] > 768 * mib) or FAKE
        m["text"] = ("1024 MiB allocated (%s); limit lowered to 768 MiB: mem_get_info total %d MiB, "
                     "256 MiB more -> %s; limit removed: 256 MiB -> %s, total %d MiB" % (
                         "ok" if r1["allocated"] else "failed", r2["total"] // mib,
                         "OutOfMemoryError" if not r2["allocated"] else "allocated (wrong)",
                         "allocated" if r3["allocated"] else "failed (wrong)", r3["total"] // mib))
    except RuntimeError as ex:
        m.update({"ok": False, "text": "failed: %s" % ex})


def quota_section(R, L, T):
    q = R.get("quota")
    if q is None:
        return
    L.append("### Compute quotas")
    L.append("")
    timing = q.get("timing_used", q.get("timing"))
    if timing == "events":
        how = ("the summed duration of its matmul kernels (CUDA events around each, a synchronize "
               "after every %d) / wall time" % QUOTA_SYNC)
    else:
        how = ("the time its kernels ran on the GPU (start and end of every kernel from CUPTI, "
               "through torch.profiler; batches of %d matmuls, one batch queued behind the "
               "running one) / wall time" % QUOTA_SYNC)
    L.append("Two PyTorch workers (bf16 %d³ matmuls) under one scheduler "
             "(auto, window %s ms); caps set with `nvsharectl --set-client PID --core-limit N`, "
             "measured over %.0f s starting %.1f s into the first window after the change "
             "(not aligned to the scheduler's windows); %d repetition(s) of every case, cases "
             "interleaved. **Share = the worker's share of GPU time**: %s; alone and uncapped "
             "it is %s. *Held* = the scheduler's own count of the time the worker held the lock "
             "over the same interval (`held_ns` of `nvsharectl --json` at both ends): what a cap "
             "limits. *Work share* = its matmul rate / its rate alone uncapped%s: higher than the "
             "GPU-time share for a lone capped job, because a GPU kept busy only part of the time "
             "runs at a higher clock. Cells are medians over repetitions; the error column gives "
             "the worst single repetition." % (
                 QUOTA_MM_N, QUOTA_WINDOW_MS, QUOTA_MEASURE, QUOTA_SKIP, q.get("reps", 1), how,
                 "%.2f%%" % (100 * q["base_gpu_share"]) if q.get("base_gpu_share") else "n/a",
                 " (%.1f/s)" % q["base"] if q.get("base") else ""))
    L.append("")
    if q.get("error"):
        L.append("Failed: %s" % q["error"])
        L.append("")
    rows, worst, worst_total = [], None, None

    def fmt(xs, f="%.2f%%"):
        return " + ".join(f % x if x is not None else "n/a" for x in xs)
    for cs in q["cases"]:
        reps = cs.get("reps") or [{"shares": cs["shares"]}]
        if any(x is None for x in cs["shares"]) or any(
                s is None for r in reps for s in r["shares"]):
            worst = float("inf")
        errs = []
        for j, cap in enumerate(cs["caps"]):
            es = [r["shares"][j] - cap for r in reps if r["shares"][j] is not None]
            e = max(es, key=abs) if es else None
            errs.append(e)
            if e is not None:
                worst = abs(e) if worst is None else max(worst, abs(e))
        tr = cs.get("total_ratio")
        if tr is not None and sum(cs["caps"]) == 100:
            worst_total = tr if worst_total is None else min(worst_total, tr)
        per_rep = "; ".join(fmt(r["shares"]) for r in reps) if len(reps) > 1 else "-"
        rows.append([cs["name"], fmt(cs["caps"], "%d%%"), fmt(cs["shares"]),
                     " / ".join("%+.2f" % e if e is not None else "n/a" for e in errs),
                     fmt(cs.get("held", [])), fmt(cs.get("work_shares", [])),
                     "%.3f" % tr if tr is not None else "-", per_rep])
    if q.get("late_max", 0) > QUOTA_SKIP:
        L.append("**A worker started %.2f s late** (after the %.1f s skipped at the start): "
                 "its first measured interval is short of work." % (q["late_max"], QUOTA_SKIP))
        L.append("")
    rp = q.get("records_per_mm")
    if rp:
        L.append("CUPTI activity records per matmul launched, over all runs: %.3f–%.3f (a drop "
                 "below the usual value would mean lost records)." % (min(rp), max(rp)))
        L.append("")
    if q.get("event_outliers"):
        L.append("Kernel samples whose events enclosed a wait for the lock (counted at the median "
                 "kernel time): %d." % q["event_outliers"])
        L.append("")
    if rows:
        L.append(md_table(["case", "caps", "GPU-time share", "worst error (points)", "held",
                           "work share", "pair total / uncapped pair", "GPU-time share per repetition"],
                          rows))
        L.append("")
    more_rows, worst_more = [], None
    for cs in q.get("more", []):
        if cs.get("error"):
            worst_more = float("inf")
            more_rows.append([cs["name"], "-", "failed: %s" % cs["error"], "-", "-", "-"])
            continue
        errs = []
        for j, t in enumerate(cs["targets"]):
            sh = cs["shares"][j]
            if t is None:
                fl = (cs.get("floor") or [None, None])[j]
                if fl is not None and (sh is None or sh < fl):
                    worst_more = float("inf")
                errs.append("-")
                continue
            if sh is None:
                worst_more = float("inf")
                errs.append("n/a")
                continue
            worst_more = abs(sh - t) if worst_more is None else max(worst_more, abs(sh - t))
            errs.append("%+.2f" % (sh - t))
        more_rows.append([cs["name"], " / ".join("%.2f%%" % t if t is not None else "unlimited"
                                                 for t in cs["targets"]),
                          fmt(cs["shares"]), " / ".join(errs), fmt(cs.get("held") or []) or "-",
                          cs.get("note", "")])
    if more_rows:
        L.append("Other cases (one run each; the live case is one worker, its share before and after "
                 "the change):")
        L.append("")
        L.append(md_table(["case", "target", "GPU-time share", "error (points)", "held", "note"],
                          more_rows))
        L.append("")
    if worst_more is not None:
        T["quota_more"] = ("%.2f points" % worst_more, worst_more <= LIMIT["quota_more"])
    if q.get("mem"):
        L.append("Memory limit at run time (`nvsharectl --set-client PID --memory-limit`): %s." %
                 q["mem"].get("text"))
        L.append("")
        T["quota_mem"] = ("yes" if q["mem"].get("ok") else "no: " + str(q["mem"].get("text")),
                          bool(q["mem"].get("ok")))
    if worst is not None:
        T["quota_err"] = ("%.2f points" % worst, worst <= LIMIT["quota_err"])
    if worst_total is not None:
        T["quota_total"] = ("%.3f×" % worst_total, worst_total >= LIMIT["quota_total"])


def run_sched_latency(R, dry):
    """bench/sched_latency measures a running scheduler: start one (mode
    auto; the tool attaches its clients to a made-up GPU reporting more
    memory than any capacity, so the scheduler serializes it)."""
    if not os.path.exists(SCHED_LATENCY_BIN):
        R["sched_latency"] = {"missing": SCHED_LATENCY_BIN}
        return
    cfg = Config("lat", "scheduler for sched_latency", {MODE_VAR: "auto"})
    start_sched(cfg, dry, real=True)
    e = tool_env(cfg.sock_dir)
    argv = ["timeout", "-k", "5", str(int(max(10, min(90, left() - 10)))), SCHED_LATENCY_BIN] + SCHED_LATENCY_ARGS
    if dry:
        say("sched_latency: NVSHARE_SOCK_DIR=%s %s" % (cfg.sock_dir, " ".join(argv)))
        return
    try:
        if cfg.error:
            R["sched_latency"] = {"rc": -1, "stdout": "", "cmd": "", "error": cfg.error}
            return
        p = subprocess.run(argv, env=e, cwd=ROOT, capture_output=True, text=True)
    finally:
        if cfg.sched:
            cfg.sched.stop()
    with open(os.path.join(LOGDIR, "sched_latency.log"), "w") as f:
        f.write(p.stdout + "\n--- stderr ---\n" + p.stderr)
    R["sched_latency"] = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-500:],
                          "cmd": " ".join(["bench/sched_latency"] + SCHED_LATENCY_ARGS)}


def text_table_to_md(text):
    """Whitespace-separated columns with a header line -> Markdown table;
    '#' lines are kept as notes below it."""
    rows = [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    notes = [ln for ln in text.splitlines() if ln.startswith("#")]
    if len(rows) < 2 or any(len(r) != len(rows[0]) for r in rows):
        return "```\n%s\n```" % text.strip()
    return md_table(rows[0], rows[1:]) + ("\n\n" + "\n".join("    " + n for n in notes) if notes else "")


# ----------------------------------------------------------------- report

def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


def report(R, meta, C):
    L = []
    T = {}  # target key -> (measured text, ok or None)
    L.append("## Benchmark run %s" % meta["date"])
    L.append("")
    L.append("- GPU: %s, driver %s, CUDA %s (driver); PyTorch %s (CUDA %s)" % (
        meta["gpu"]["name"], meta["gpu"]["driver"], meta["gpu"]["cuda"], meta.get("torch", "?"),
        meta.get("torch_cuda", "?")))
    L.append("- Command: `%s`" % meta["command"])
    L.append("- Free GPU memory at start %d MiB of %d MiB; working sets %d MiB (small) / %d MiB (normal)%s." % (
        meta["gpu"]["free_mib"], meta["gpu"]["total_mib"], meta["small_mib"], meta["normal_mib"],
        ", scaled down to fit %d%% of free memory" % BUDGET_PCT if meta["mem_scale"] < 1 else ""))
    L.append("- Cells: ratio to native first (**median** over repetitions, (min–max) of the "
             "per-repetition ratios), then absolute times as median (min–max). Overhead: %d repetitions, "
             "two-job scenarios: %d; configurations interleaved per repetition." % (REPS_OVERHEAD, REPS_PAIR))
    L.append("- Configurations: %s." % "; ".join("`%s` = %s" % (c.name, c.label) for c in C.values()))
    broken = ["`%s`: %s" % (c.name, c.error) for c in C.values() if c.error]
    if broken:
        L.append("- Failures: " + "; ".join(broken))
    L.append("")

    # overhead
    o = R.get("overhead")
    if o:
        rows = []
        for kind, key, what in (("compute", "ovh_compute", "compute-bound: bf16 %d³ matmul × %d" % (
                OVERHEAD_MM_N, int(OVERHEAD_MM_ITERS * TIME_SCALE))),
                ("launch", "ovh_launch", "launch-bound: %d adds on a 1-element tensor" % int(
                    OVERHEAD_LAUNCH_ITERS * TIME_SCALE))):
            nat = o.get("native", {}).get(kind, [])
            row = [what, cell_time(nat)]
            for n in ("auto", "on"):
                xs = o.get(n, {}).get(kind, [])
                rs = ratios(xs, nat)
                row += [cell_ratio(rs), cell_time(xs)]
                if n == "auto":
                    T[key] = ("%.4f×" % median(rs), median(rs) <= LIMIT[key]) if rs else ("n/a", None)
            rows.append(row)
        L.append("### Overhead of a single job")
        L.append("")
        L.append(md_table(["workload", "native", "nvshare auto / native", "nvshare auto",
                           "nvshare on / native", "nvshare on"], rows))
        L.append("")

    # fit
    f = R.get("fit")
    if f:
        rows = []
        worst = None
        for wl, per in f.items():
            nat = [r["makespan"] for r in per.get("native", [])]
            auto = [r["makespan"] for r in per.get("auto", [])]
            on = [r["makespan"] for r in per.get("on", [])]
            nopf = [r["makespan"] for r in per.get("auto_nopf", [])]
            res_all = [r["correct"] for v in per.values() for r in v]
            ok_all = "n/a" if not res_all else ("yes" if all(res_all) else "**NO**")
            ra = ratios(auto, nat)
            if ra:
                worst = max(worst or 0, median(ra))
            rows.append([wl, cell_ratio(ra), cell_ratio(ratios(nopf, nat)), cell_ratio(ratios(on, nat)),
                         cell_time(nat), cell_time(auto), cell_time(on), ok_all])
        T["fit_auto"] = ("%.4f× (worst workload)" % worst if worst else "n/a",
                         worst <= 1.01 if worst else None)
        L.append("### Two jobs that fit together: makespan")
        L.append("")
        L.append("Both jobs start at the same instant; %d MiB working set each." % meta["small_mib"])
        L.append("")
        L.append(md_table(["workload", "auto / native side by side",
                           "auto without prefetch-on-alloc / native", "on / native side by side",
                           "native side by side", "nvshare auto", "nvshare on", "results correct"], rows))
        L.append("")

    # idle
    i = R.get("idle")
    if i:
        L.append("### Idle release under `on`")
        L.append("")
        if "error" in i:
            L.append("Not measured: %s" % i["error"])
            T["idle"] = ("error", None)
        else:
            lat = i["latencies"]
            L.append(md_table(["hand-offs", "median", "min", "max", "all (ms)"], [[
                len(lat), fmt_ms(median(lat)), fmt_ms(min(lat)), fmt_ms(max(lat)),
                ", ".join("%.1f" % (x * 1e3) for x in lat)]]))
            L.append("")
            L.append("From the holder's last kernel completion (after its `torch.cuda.synchronize()`) "
                     "to the waiting job's first step completion. The original nvshare needed 5.2 s.")
            T["idle"] = ("median %s, worst %s" % (fmt_ms(median(lat)), fmt_ms(max(lat))), max(lat) < 0.050)
        L.append("")

    # interactive
    it = R.get("interactive")
    if it:
        rows = []
        nat_sps = it.get("native", {}).get("batch_during_sps")
        for n, r in it.items():
            if "error" in r:
                rows.append([n, "error: %s" % r["error"]] + [""] * 5)
                continue
            lat = r["burst_lat"]
            hu = r["holdups"]
            rows.append([n, fmt_ms(r["first"]), fmt_ms(pct(lat, 50)), fmt_ms(pct(lat, 99)),
                         "%.1f → %.1f" % (r["batch_alone_sps"], r["batch_during_sps"]),
                         "%.3f×" % (r["batch_during_sps"] / nat_sps) if nat_sps else "n/a",
                         "%s / %s" % (fmt_ms(pct(hu, 50)), fmt_ms(max(hu))) if hu else "n/a"])
        a = it.get("auto", {})
        T["first_burst"] = (fmt_ms(a["first"]), a["first"] <= 0.100) if "first" in a else ("n/a", None)
        on = it.get("on_i", {})
        T["holdup"] = (("worst %s" % fmt_ms(max(on["holdups"])), max(on["holdups"]) <= 0.050)
                       if on.get("holdups") else ("n/a", None))
        L.append("### Interactive beside batch")
        L.append("")
        L.append("%d bursts of %d bf16 %d² matmuls every %d ms beside a batch job of back-to-back bf16 %d³ "
                 "matmuls; `on_i` is mode on with TQ %s s. Burst latency = first launch to "
                 "synchronize; p99 of %d samples is nearest-rank (= the worst but one or the worst). "
                 "Hold-up = a burst's end to the batch job's next launch returning." % (
                     BURSTS, BURST_K, BURST_SIZE, BURST_PERIOD * 1000, BATCH_N, TQ_INTERACTIVE, BURSTS))
        L.append("")
        L.append(md_table(["config", "first burst", "burst p50", "burst p99",
                           "batch steps/s alone → during bursts", "batch during / native",
                           "batch hold-up p50 / max"], rows))
        L.append("")

    # pressure
    p = R.get("pressure")
    if p:
        swap = p.get("_swap") or {}
        p = {k: v for k, v in p.items() if k != "_swap"}
        rows = []
        names = [n for n in ("native_seq", "native", "pressure", "pressure_noswap") if any(
            n in per for per in p.values())]
        for wl, per in p.items():
            seq = [r["makespan"] for r in per.get("native_seq", [])]
            row = [wl]
            for n in names:
                xs = [r["makespan"] for r in per.get(n, [])]
                row.append("%s<br>%s" % (cell_ratio(ratios(xs, seq)), cell_time(xs)) if xs else "n/a")
            res_all = [r["correct"] for v in per.values() for r in v]
            row.append("n/a" if not res_all else ("yes" if all(res_all) else "**NO**"))
            rows.append(row)
        label = {"native_seq": "native, one after the other", "native": "native side by side (real memory fits)",
                 "pressure": "nvshare auto, capacity %s" % meta["capacity"],
                 "pressure_noswap": "same, swap off (%s)" % meta.get("swap_env", "")}
        L.append("### Memory pressure (simulated capacity)")
        L.append("")
        L.append("Two jobs of %d MiB each, scheduler capacity %s (NVSHARE_GPU_CAPACITY) so they cannot "
                 "run together; TQ %s s. Ratios are to native sequential. %s" % (
                     meta["normal_mib"], meta["capacity"], TQ_PRESSURE,
                     "Swap switch: `%s`." % meta["swap_env"] if meta.get("swap_env") else
                     "No swap on/off switch was found in the binaries: swap off not measured."))
        L.append("")
        L.append(md_table(["workload"] + [label[n] for n in names] + ["results correct"], rows))
        L.append("")
        pf, cs = swap.get("prefetch"), swap.get("counters") or {}
        if pf:
            L.append("Plain `cuMemPrefetchAsync` of one %d MiB managed buffer (native worker): host → GPU "
                     "%.1f GB/s, GPU → host %.1f GB/s." % (pf["bytes"] >> 20, pf["h2d_gbps"], pf["d2h_gbps"]))
        for n in ("pressure", "pressure_noswap"):
            c = cs.get(n)
            if not c:
                continue
            bw = c["bytes_in"] / c["ns_in"] if c["ns_in"] else 0
            L.append("%s: swapped in %.0f MiB in %.2f s (%s), out %.0f MiB in %.2f s; effective TQ %d ms%s." % (
                label[n], c["bytes_in"] / 2**20, c["ns_in"] / 1e9,
                "%.1f GB/s" % bw if c["ns_in"] else "no swap-in", c["bytes_out"] / 2**20, c["ns_out"] / 1e9,
                c["tq_effective_ms"],
                " = %.0f%% of the plain prefetch" % (100 * bw / pf["h2d_gbps"]) if pf and c["ns_in"] and pf["h2d_gbps"] else ""))
        L.append("")

    s = R.get("sched_latency")
    if s:
        L.append("### Scheduler costs (`bench/sched_latency`)")
        L.append("")
        if "missing" in s:
            L.append("Not run: %s was not built." % os.path.relpath(s["missing"], ROOT))
        else:
            L.append("`%s` against a scheduler started for it; exit status %d%s." % (
                s["cmd"] or "sched_latency", s["rc"], (": " + s.get("error") or s.get("stderr", "").strip()[-300:])
                if s["rc"] else ""))
            L.append("Lock round trip = REQ_LOCK -> LOCK_OK with the GPU free; handoff = holder's "
                     "LOCK_RELEASED -> next holder's LOCK_OK; microseconds.")
            L.append("")
            L.append(text_table_to_md(s["stdout"]))
        L.append("")

    quota_section(R, L, T)

    # the targets table goes right after the header bullets
    rows = [[text, T[k][0], verdict(T[k][1])] for k, text, _ in TARGETS if k in T]
    tgt = ["### Targets", "", md_table(["target", "measured", "status"], rows), ""] if rows else []
    return "\n".join(_assemble(L, tgt))


def _assemble(L, tgt):
    # L: header lines up to the first blank after the bullet list, then sections.
    k = 0
    for idx, line in enumerate(L):
        if idx > 1 and line == "":
            k = idx + 1
            break
    return L[:k] + tgt + L[k:]


# ------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description="nvshare benchmarks (use bench/run)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--only", default="", help="comma list of: " + ",".join(SCENARIOS))
    ap.add_argument("--no-docs", action="store_true", help="do not touch docs/BENCHMARKS.md")
    ap.add_argument("--command", default="bench/run", help="command line to record")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s] or SCENARIOS
    bad = [s for s in only if s not in SCENARIOS]
    if bad:
        sys.exit("unknown scenario(s): %s" % ",".join(bad))
    os.makedirs(LOGDIR, exist_ok=True)

    gpu = query_gpu(a.dry_run)
    for f in (LIB, SCHED_BIN):
        if not os.path.exists(f) and not a.dry_run and not FAKE:
            sys.exit("missing %s (build first or set NVS_BUILD)" % f)
    # GPU safety: the largest real footprint is the pressure pair (two
    # normal working sets) plus idle workers' contexts' leftovers.
    need = 2 * NORMAL_MIB + 512
    budget = gpu["free_mib"] * BUDGET_PCT / 100.0
    scale = min(1.0, budget / need)
    if scale < 0.1:
        sys.exit("only %d MiB free on the GPU: too little to benchmark safely" % gpu["free_mib"])
    small = max(64, int(SMALL_MIB * scale) // 64 * 64)
    normal = max(128, int(NORMAL_MIB * scale) // 64 * 64)
    cap_mib = int(2 * normal * PRESSURE_CAP_FRACTION)
    capacity = "%dMi" % cap_mib if cap_mib % 1024 else "%dGi" % (cap_mib // 1024)
    swap_env = detect_swap_env()

    C = {}

    def add(name, label, sched_env=None, client_env=None):
        C[name] = Config(name, label, sched_env, client_env)

    add("native", "no preload, no scheduler")
    if any(s in only for s in ("overhead", "fit", "interactive")):
        add("auto", "nvshare, mode auto (fits: concurrent)", {MODE_VAR: "auto"})
    if "fit" in only:
        # The same, without prefetching fresh allocations to the GPU: shows
        # what the client's prefetch-on-allocation is worth (first touch of
        # fresh managed memory otherwise populates pages by GPU faults).
        add("auto_nopf", "nvshare, mode auto, NVSHARE_PREFETCH_ON_ALLOC=0", {MODE_VAR: "auto"},
            {"NVSHARE_PREFETCH_ON_ALLOC": "0"})
    if any(s in only for s in ("overhead", "fit", "idle")):
        add("on", "nvshare, mode on" + (", TQ %s" % TQ_ON if TQ_ON else " (default TQ)"),
            dict({MODE_VAR: "on"}, **({TQ_VAR: TQ_ON} if TQ_ON else {})))
    if "interactive" in only:
        add("on_i", "nvshare, mode on, TQ %s s" % TQ_INTERACTIVE, {MODE_VAR: "on", TQ_VAR: TQ_INTERACTIVE})
    if "pressure" in only:
        add("pressure", "nvshare auto, capacity %s, TQ %s s" % (capacity, TQ_PRESSURE),
            {MODE_VAR: "auto", CAP_VAR: capacity, TQ_VAR: TQ_PRESSURE})
        if swap_env:
            add("pressure_noswap", "as pressure with %s" % " ".join("%s=%s" % kv for kv in swap_env.items()),
                dict({MODE_VAR: "auto", CAP_VAR: capacity, TQ_VAR: TQ_PRESSURE}, **swap_env), dict(swap_env))
    if "quota" in only:
        add("quota", "nvshare auto, compute window %s ms, caps set with nvsharectl" % QUOTA_WINDOW_MS,
            {MODE_VAR: "auto", "NVSHARE_COMPUTE_WINDOW_MS": QUOTA_WINDOW_MS})
    if only == ["sched_latency"]:
        C = {}

    say("GPU %s, free %d MiB; budget %d%% = %d MiB; working sets %d/%d MiB; pressure capacity %s" % (
        gpu["name"], gpu["free_mib"], BUDGET_PCT, budget, small, normal, capacity))
    say("swap switch: %s" % (swap_env or "none found"))
    say("scenarios: %s; deadline %.0f s; logs %s" % (",".join(only), DEADLINE, LOGDIR))

    R = {}
    pidfile = os.path.join(LOGDIR, "bench.pids")
    try:
        for c in C.values():
            if c.preload:
                start_sched(c, a.dry_run)
            start_workers(c, a.dry_run)
        if a.dry_run:
            plan_dry(only, small, normal)
            return 0
        with open(pidfile, "w") as f:
            for c in C.values():
                for ch in ([c.sched] if c.sched else []) + c.workers:
                    f.write("%d\n" % ch.pid)
        broadcast(C.values(), {"op": "hello"}, WORKER_START_TIMEOUT)
        broadcast(C.values(), {"op": "warmup", "mm_n": OVERHEAD_MM_N}, CMD_TIMEOUT)
        for c in C.values():
            say("%-16s %s" % (c.name, "ready" if c.usable() else "FAILED: %s" % c.error))
        info = next((c.info for c in C.values() if c.info), {})
        meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "gpu": gpu, "torch": info.get("torch", "?"), "torch_cuda": info.get("torch_cuda", "?"),
                "command": a.command, "small_mib": small, "normal_mib": normal, "capacity": capacity,
                "mem_scale": scale, "swap_env": " ".join("%s=%s" % kv for kv in swap_env.items())}
        # rough costs (s) to skip what no longer fits in the deadline
        cost = {"overhead": 20, "fit": 30, "idle": 10, "interactive": 30, "pressure": 50, "sched_latency": 15,
                "quota": 75}
        for s in only:
            if left() < cost[s]:
                say("skipping %s: %.0f s left" % (s, left()))
                R.setdefault("skipped", []).append(s)
                continue
            t = time.monotonic()
            if s == "overhead":
                run_overhead(C, R, ["native", "auto", "on"])
            elif s == "fit":
                R["fit"] = run_pairs(C, ["native", "auto", "auto_nopf", "on"],
                                     [("add", "small"), ("mm", "small")],
                                     {"small": small})
            elif s == "idle":
                run_idle(C, R)
            elif s == "interactive":
                run_interactive(C, R, ["native", "auto", "on_i"])
            elif s == "pressure":
                R["pressure"] = run_pressure(C, normal)
            elif s == "sched_latency":
                run_sched_latency(R, a.dry_run)
            elif s == "quota":
                run_quota(C, R)
            say("%s done in %.1f s (%.0f s left)" % (s, time.monotonic() - t, left()))
    finally:
        for c in C.values():
            for w in c.workers:
                w.stop()
            if c.sched:
                c.sched.stop()
        for d in TMPDIRS:
            shutil.rmtree(d, ignore_errors=True)
    if a.dry_run:
        return 0
    md = report(R, meta, C)
    if R.get("skipped"):
        md += "\nSkipped for lack of time: %s.\n" % ", ".join(R["skipped"])
    print()
    print(md)
    with open(os.path.join(LOGDIR, "bench.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(LOGDIR, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": R}, f, indent=1, default=str)
    if not a.no_docs:
        path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
        old = open(path).read() if os.path.exists(path) else "# Benchmarks\n\nWritten by `bench/run`.\n"
        with open(path, "w") as f:
            f.write(replace_section(old, md, "<!-- bench:begin -->", "<!-- bench:end -->"))
        say("wrote %s and %s" % (os.path.relpath(path, ROOT), os.path.join(LOGDIR, "bench.md")))
    say("total %.0f s" % (time.monotonic() - T_START))
    failed = [c.name for c in C.values() if c.error]
    if failed:
        say("configurations with failures: %s (see the report and %s)" % (", ".join(failed), LOGDIR))
    return 1 if failed else 0


def swap_counters(cfg):
    """The pressure scheduler's per-GPU swap totals (nvsharectl --json)."""
    if FAKE or not cfg or not cfg.sock_dir:
        return None
    e = tool_env(cfg.sock_dir)
    try:
        r = subprocess.run([CTL_BIN, "--json"], env=e, capture_output=True, text=True, timeout=10)
        g = json.loads(r.stdout)["gpus"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None
    tot = {k: sum(x.get("swap", {}).get(k, 0) for x in g) for k in ("bytes_in", "bytes_out", "ns_in", "ns_out")}
    tot["tq_effective_ms"] = max((x.get("tq_effective_ms", 0) for x in g), default=0)
    return tot


def run_pressure(C, normal):
    """native_seq: the native pair, one job after the other. Also the plain
    prefetch bandwidths (native worker) and the swap counters of the pressure
    schedulers (docs/swap.md)."""
    C2 = dict(C)
    if "native" in C:
        C2["native_seq"] = C["native"]
    bw = None
    if "native" in C and C["native"].usable():
        try:
            bw = pair_call(C["native"], [{"op": "h2d_bw", "mib": normal}, None])[0]
        except RuntimeError as ex:
            say("h2d_bw on native: %s" % ex)
    before = {n: swap_counters(C.get(n)) for n in ("pressure", "pressure_noswap")}
    res = run_pairs(C2, ["native_seq", "native", "pressure", "pressure_noswap"],
                    [("add", "normal"), ("mm", "normal")], {"normal": normal},
                    sequential=("native_seq",))
    sw = {}
    for n in ("pressure", "pressure_noswap"):
        a, b = before.get(n), swap_counters(C.get(n))
        if a and b:
            sw[n] = {k: b[k] - a[k] for k in ("bytes_in", "bytes_out", "ns_in", "ns_out")}
            sw[n]["tq_effective_ms"] = b["tq_effective_ms"]
    res["_swap"] = {"prefetch": bw, "counters": sw}
    return res


def plan_dry(only, small, normal):
    say("plan (each line: scenario -> configurations, commands sent to the workers):")
    t = 0.0
    if "overhead" in only:
        say("overhead    -> native, auto, on (worker 0): 1 warm + %d reps of compute "
            "{bf16 %d^3 x %d} and launch {%d adds}" % (REPS_OVERHEAD, OVERHEAD_MM_N,
                                                     OVERHEAD_MM_ITERS, OVERHEAD_LAUNCH_ITERS))
        t += 3 * (REPS_OVERHEAD + 1) * (OVERHEAD_MM_ITERS * 0.00165 + 0.3)
    if "fit" in only:
        say("fit         -> native, auto, on: both workers job{add|mm, %d MiB} at one start_at, %d reps" % (
            small, REPS_PAIR))
        t += 2 * REPS_PAIR * 3 * 1.4
    if "idle" in only:
        say("idle        -> on: pingpong %d hand-offs, margin %.1f s" % (PINGPONG_HANDOFFS, PINGPONG_MARGIN))
        t += PINGPONG_HANDOFFS * 0.4
    if "interactive" in only:
        say("interactive -> native, auto, on_i: worker 0 batch{bf16 %d^3}, worker 1 %d bursts x %d mm %d^2 "
            "every %.1f s" % (BATCH_N, BURSTS, BURST_K, BURST_SIZE, BURST_PERIOD))
        t += 3 * (LEAD_IN + BURSTS * BURST_PERIOD + 1)
    if "pressure" in only:
        say("pressure    -> native (sequential and side by side), pressure[, pressure_noswap]: "
            "job{add|mm, %d MiB} x2, %d reps" % (normal, REPS_PAIR))
        t += 2 * REPS_PAIR * 4 * 2.4
    if "sched_latency" in only:
        say("sched_lat.  -> %s %s" % (SCHED_LATENCY_BIN, " ".join(SCHED_LATENCY_ARGS)))
        t += 15
    if "quota" in only:
        say("quota       -> quota: nvsharectl caps, worker spin{bf16 %d^3, batches of %d, timing %s}: "
            "alone, uncapped pair, singles %s, pairs %s x %d reps; %.1f s lead + %.1f s each" % (
                QUOTA_MM_N, QUOTA_SYNC, QUOTA_TIMING, QUOTA_SINGLES, QUOTA_PAIRS, QUOTA_REPS,
                QUOTA_LEAD, QUOTA_MEASURE))
        t += (5 + QUOTA_REPS * (len(QUOTA_SINGLES) + len(QUOTA_PAIRS))) * (
            QUOTA_LEAD + QUOTA_SKIP + QUOTA_MEASURE + 0.5) + 30
    say("estimated GPU time ~%.0f s plus ~20 s of worker start-up and warm-up" % t)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
