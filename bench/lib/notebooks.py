"""Scenario `notebooks` (issue 21): one batch job and several notebook-like
jobs whose memory does not fit NVSHARE_GPU_CAPACITY, native (the memory
really fits on the GPU) beside nvshare, in two cases:

  nb3: batch 2 GiB + 3 notebooks of 1.5 GiB, capacity 6Gi
  nb8: batch 2 GiB + 8 notebooks of 0.5 GiB, capacity 4Gi

Each run starts its own processes (bench/notebook_worker.py) and, for
nvshare, its own scheduler on a private socket directory; all processes
start together at one CLOCK_MONOTONIC instant and run BENCH_NB_SECONDS.
Configurations are interleaved per repetition (native, nvshare, [off], then
reversed). Reported per configuration: bursts completed, burst latency p50 /
p99 (nearest rank, all notebooks' bursts of a run), batch steps/s, the
longest time a notebook went without completing a burst; medians over
repetitions. GPU safety: the real footprint is ~6.5 GiB plus contexts, far
below any H100/H200's free memory (checked before the run)."""
import json
import os
import select
import subprocess
import time

import config
from benchlib import fmt_ms, md_table, median, pct
from orchestration import start_private_sched
from progress import say

NB_SECONDS = config.env("BENCH_NB_SECONDS", 2.0 if config.FAKE else 20.0, float)
NB_REPS = config.env("BENCH_NB_REPS", 1 if config.FAKE else 2, int)
NB_IDLE = config.env("BENCH_NB_IDLE", 2.0, float)
NB_BURST = 5
# BENCH_NB_OFF=1: also nvshare with --coschedule off (one holder at a time).
NB_OFF = config.env("BENCH_NB_OFF", "1") == "1"
# BENCH_NB_UNDECLARED=1: also nvshare with clients that declare nothing (no
# NVSHARE_PRIORITY), as most users run them (issue 32).
NB_UNDECLARED = config.env("BENCH_NB_UNDECLARED", "1") == "1"
WORKER = os.path.join(config.BENCH_DIR, "notebook_worker.py")
CASES = [("nb3", 3, 2048, 1536, "6Gi"), ("nb8", 8, 2048, 512, "4Gi")]
# Seconds the scenario needs (start-up ~15 s per run).
NB_COST = len(CASES) * (2 + NB_OFF + NB_UNDECLARED) * NB_REPS * (NB_SECONDS + 15)


def _start_sched(name, cap, extra):
    return start_private_sched(name, dict({"NVSHARE_SCHED_MODE": "auto", "NVSHARE_GPU_CAPACITY": cap,
                                           "NVSHARE_EVENTS": os.path.join(config.LOGDIR, "events-%s.jsonl" % name)},
                                          **extra), NB_SECONDS + 200)


def _readline(p, buf, deadline):
    while b"\n" not in buf[0]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError("timeout")
        r, _, _ = select.select([p.stdout], [], [], left)
        if r:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError("worker exited")
            buf[0] += chunk
    line, buf[0] = buf[0].split(b"\n", 1)
    return line.decode(errors="replace")


def run_once(name, case, nvshare, sched_extra, declare=True):
    """One run of case under configuration name; returns its measurements."""
    cname, nnb, bmib, nmib, cap = case
    sched = sock = None
    procs = []
    try:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env["PYTHONUNBUFFERED"] = "1"
        if nvshare and not config.FAKE:
            sched, sock = _start_sched("%s-%s" % (cname, name), cap, sched_extra)
            env["LD_PRELOAD"] = config.PRELOAD
            env["NVSHARE_SOCK_DIR"] = sock
        roles = [("batch", bmib)] + [("notebook", nmib)] * nnb
        for i, (role, mib) in enumerate(roles):
            e = dict(env)
            if nvshare and declare:
                e["NVSHARE_PRIORITY"] = "batch" if role == "batch" else "interactive"
            log = open(os.path.join(config.LOGDIR, "nb-%s-%s-%d.log" % (cname, name, i)), "ab")
            procs.append((subprocess.Popen(
                ["timeout", "-k", "5", str(int(NB_SECONDS + 180)), config.PY, "-u", WORKER, role, str(mib)],
                env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=config.ROOT), [b""]))
        info = {}
        for p, buf in procs:
            line = _readline(p, buf, time.monotonic() + 150)
            if not line.startswith("READY"):
                raise RuntimeError("worker: %s" % line[:200])
            info = json.loads(line.split(" ", 1)[1])
        t0 = time.monotonic() + 0.5
        for i, (p, _) in enumerate(procs):
            phase = 0.0 if i == 0 else NB_IDLE * (i - 1) / nnb
            p.stdin.write(("GO %.6f %.3f %.3f %d %.3f\n" % (t0, NB_SECONDS, NB_IDLE, NB_BURST, phase)).encode())
            p.stdin.flush()
        res = []
        for p, buf in procs:
            line = _readline(p, buf, t0 + NB_SECONDS + 120)
            while not line.startswith("RESULT"):
                line = _readline(p, buf, t0 + NB_SECONDS + 120)
            res.append(json.loads(line.split(" ", 1)[1]))
        b = res[0]
        nbs = res[1:]
        lat = [x for r in nbs for x in r["lat"]]
        gaps = []
        for r in nbs:
            pts = [0.0] + r["done"] + [NB_SECONDS]
            gaps.append(max(pts[i + 1] - pts[i] for i in range(len(pts) - 1)))
        return {"bursts": sum(len(r["done"]) for r in nbs), "p50": pct(lat, 50), "p99": pct(lat, 99),
                "max": max(lat) if lat else float("nan"), "sps": b["steps"] / b["elapsed"],
                "gap": max(gaps), "info": info}
    finally:
        _stop(procs, sched)


def _stop(procs, sched, wait_s=10):
    """Ends a run's workers (EOF on their stdin, then a kill after wait_s)
    and its scheduler."""
    for p, _ in procs:
        try:
            p.stdin.close()
        except OSError:
            pass
    for p, _ in procs:
        try:
            p.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if sched:
        sched.terminate()
        try:
            sched.wait(timeout=5)
        except subprocess.TimeoutExpired:
            sched.kill()


# Real footprint of the largest case: 6.5 GiB of data + 9 CUDA contexts.
NB_FOOTPRINT_MIB = 6656 + 9 * 600


def run_notebooks(R, gpu):
    need = NB_FOOTPRINT_MIB * 100 / config.BUDGET_PCT
    if not config.FAKE and gpu.get("free_mib", 0) < need:
        say("notebooks skipped: %d MiB free, %d MiB needed (%d%% budget)" % (gpu.get("free_mib", 0), need,
                                                                          config.BUDGET_PCT))
        R["notebooks"] = {"skipped": "only %d MiB free" % gpu.get("free_mib", 0)}
        return
    confs = [("native", False, {}), ("nvshare", True, {})]
    if NB_UNDECLARED:
        confs.append(("nvshare_undeclared", True, {}))
    if NB_OFF:
        confs.append(("nvshare_off", True, {"NVSHARE_COSCHEDULE": "off"}))
    out = {"seconds": NB_SECONDS, "reps": NB_REPS, "idle": NB_IDLE, "burst": NB_BURST}
    for case in CASES:
        runs = {n: [] for n, _, _ in confs}
        for rep in range(NB_REPS):
            order = confs if rep % 2 == 0 else list(reversed(confs))
            for n, ns, extra in order:
                try:
                    r = run_once(n, case, ns, extra, declare=n != "nvshare_undeclared")
                    say("notebooks %s %s rep %d: bursts %d p50 %s p99 %s batch %.1f steps/s gap %.1f s" % (
                        case[0], n, rep, r["bursts"], fmt_ms(r["p50"]), fmt_ms(r["p99"]), r["sps"], r["gap"]))
                    runs[n].append(r)
                    out["torch"] = r["info"].get("torch", "?")
                except Exception as ex:  # noqa: BLE001 (reported, the run goes on)
                    say("notebooks %s %s rep %d failed: %s" % (case[0], n, rep, ex))
                    runs[n].append({"error": str(ex)})
        out[case[0]] = runs
    R["notebooks"] = out


def _med(rs, k):
    v = [r[k] for r in rs if "error" not in r]
    return median(v) if v else float("nan")


def notebooks_section(nb, meta, L, T):
    L.append("### Notebooks under memory pressure (`notebooks`)")
    L.append("")
    L.append("One batch job (back-to-back steps: 8 bf16 4096² matmuls + a pass over its buffer) and "
             "notebook-like jobs (bursts of %d such steps, then %.1f s idle), %.0f s per run, %d "
             "repetitions, medians; `native` = no preload (the memory really fits), `nvshare` = "
             "mode auto with the capacity below (co-scheduling on, clients declare "
             "`NVSHARE_PRIORITY`), `nvshare_undeclared` = the same with clients that declare nothing, "
             "`nvshare_off` = `--coschedule off` (one holder at a time, as before). Burst latency = end of the idle period → first step done. "
             "PyTorch %s." % (nb["burst"], nb["idle"], nb["seconds"], nb["reps"], nb.get("torch", "?")))
    L.append("")
    for cname, nnb, bmib, nmib, cap in CASES:
        runs = nb.get(cname)
        if nb.get("skipped"):
            L.append("Skipped: %s (GPU safety)." % nb["skipped"])
            L.append("")
            return
        if not runs:
            continue
        nat = runs.get("native", [])
        rows = []
        for n, rs in runs.items():
            errs = [r["error"] for r in rs if "error" in r]
            if len(errs) == len(rs):
                rows.append([n, "error: %s" % errs[0]] + [""] * 6)
                continue
            b, nb_b = _med(rs, "bursts"), _med(nat, "bursts")
            s, nat_s = _med(rs, "sps"), _med(nat, "sps")
            rows.append([n, "%d" % b, "%.3f×" % (b / nb_b) if nb_b else "n/a", fmt_ms(_med(rs, "p50")),
                         fmt_ms(_med(rs, "p99")), fmt_ms(_med(rs, "max")),
                         "%.1f (%.3f×)" % (s, s / nat_s) if nat_s else "%.1f" % s,
                         "%.2f s" % max(r["gap"] for r in rs if "error" not in r)])
        L.append("%s: batch %d MiB + %d notebooks of %d MiB, `NVSHARE_GPU_CAPACITY=%s`" % (
            cname, bmib, nnb, nmib, cap))
        L.append("")
        L.append(md_table(["config", "bursts", "vs native", "latency p50", "p99", "max",
                           "batch steps/s (vs native)", "longest gap without a burst (worst)"], rows))
        L.append("")
        ns = [r for r in runs.get("nvshare", []) if "error" not in r]
        if not ns or not [r for r in nat if "error" not in r]:
            continue
        br = _med(ns, "bursts") / max(1e-9, _med(nat, "bursts"))
        sr = _med(ns, "sps") / max(1e-9, _med(nat, "sps"))
        p50, p99 = _med(ns, "p50"), _med(ns, "p99")
        gap = max(r["gap"] for r in ns)
        nu = [r for r in runs.get("nvshare_undeclared", []) if "error" not in r]
        if nu:
            ubr = _med(nu, "bursts") / max(1e-9, _med(nat, "bursts"))
            usr = _med(nu, "sps") / max(1e-9, _med(nat, "sps"))
            up50, up99 = _med(nu, "p50"), _med(nu, "p99")
            k = "nbu3" if cname == "nb3" else "nbu8"
            T[k + "_bursts"] = ("%.3f×" % ubr, ubr >= 0.95)
            T[k + "_batch"] = ("%.3f×" % usr, usr >= 0.90)
            if cname == "nb3":
                T["nbu3_lat"] = ("p50 %s, p99 %s" % (fmt_ms(up50), fmt_ms(up99)), up50 <= 0.030 and up99 <= 0.100)
            else:
                T["nbu8_lat"] = ("p99 %s" % fmt_ms(up99), up99 <= 0.150)
        if cname == "nb3":
            T["nb3_bursts"] = ("%.3f×" % br, br >= 0.95)
            T["nb3_lat"] = ("p50 %s, p99 %s" % (fmt_ms(p50), fmt_ms(p99)), p50 <= 0.020 and p99 <= 0.500)
            T["nb3_batch"] = ("%.3f×" % sr, sr >= 0.80)
        else:
            T["nb8_bursts"] = ("%.3f×" % br, br >= 0.90)
            T["nb8_lat"] = ("p99 %s" % fmt_ms(p99), p99 <= 1.0)
            T["nb8_batch"] = ("%.3f×" % sr, sr >= 0.60)
            T["nb8_gap"] = ("%.2f s" % gap, gap <= 5.0)
