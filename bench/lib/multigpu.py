"""Scenario `multigpu` (issue 20; only when named; needs two GPUs): what
nvshare costs on a machine of several GPUs, native beside nvshare in one
run, configurations interleaved per repetition.

  independence: four jobs at one instant, two per GPU (in-place adds over
      MG_MIB MiB, tests/gpu/job_add.py). nvshare runs mode auto with
      NVSHARE_GPU_CAPACITY=<cap0>,<cap1>: GPU 0's capacity is below its two
      jobs (it serializes), GPU 1's above (they run together). Reported per
      GPU: makespan from the common start to the GPU's last job's end.
      Target: GPU 1's makespan under nvshare within 5 % of native, i.e. a
      serialized GPU 0 does not slow GPU 1 down.
  nccl: an all-reduce of MG_NCCL_MIB MiB, MG_NCCL_ITERS times, one process
      per GPU (tests/gpu/c9_multi.py nccl), native and under nvshare (mode
      auto, memory fits). Target: loop time within 5 % of native.

The job scripts are the GPU suite's (tests/gpu): the same programs, no
second copy. GPU safety: 4 x MG_MIB MiB in all (2 x per GPU), far below
free memory (checked before the run)."""
import json
import os
import subprocess
import time

import config
from benchlib import md_table, median
from orchestration import mktemp, start_private_sched
from progress import say

MG_MIB = config.env("BENCH_MG_MIB", 2048, int)
MG_ITERS = config.env("BENCH_MG_ITERS", 3000, int)
MG_REPS = config.env("BENCH_MG_REPS", 3, int)
MG_NCCL_MIB = config.env("BENCH_MG_NCCL_MIB", 256, int)
MG_NCCL_ITERS = config.env("BENCH_MG_NCCL_ITERS", 40, int)
GPU_TESTS = os.path.join(config.ROOT, "tests", "gpu")
# GPU 0 below its two jobs, GPU 1 above them.
MG_CAPACITY = "%dMi,%dMi" % (MG_MIB * 3 // 2, MG_MIB * 4)
# Seconds: start-up ~10 s per run, 2 configurations, 2 kinds of run.
MG_COST = MG_REPS * 2 * 2 * 20


def _gpu_count():
    if config.FAKE:
        return 0
    q = subprocess.run(["timeout", "30", "nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
                       capture_output=True, text=True)
    return len(q.stdout.split()) if q.returncode == 0 else 0


def _start_sched(name, extra):
    return start_private_sched("mg-" + name, dict({"NVSHARE_SCHED_MODE": "auto"}, **extra), 300)


def _stop(p):
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _run_procs(name, specs, sock, go=None):
    """Starts one Python process per (label, visible devices, script args)
    in specs, with the preload when sock is set; with go, touches that file
    once every process wrote its ready file. Returns each process's JSON."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["PYTHONUNBUFFERED"] = "1"
    if sock:
        env["LD_PRELOAD"] = config.PRELOAD
        env["NVSHARE_SOCK_DIR"] = sock
    procs = []
    try:
        for label, vis, args in specs:
            e = dict(env)
            if vis is not None:
                e["CUDA_VISIBLE_DEVICES"] = vis
            log = open(os.path.join(config.LOGDIR, "mg-%s-%s.log" % (name, label)), "ab")
            procs.append(subprocess.Popen(["timeout", "-k", "5", "180", config.PY] + args,
                                          env=e, stdout=log, stderr=log, cwd=config.ROOT))
        if go:
            end = time.monotonic() + 150
            ready = [a[a.index("--ready-file") + 1] for _, _, a in specs]
            while not all(os.path.exists(r) for r in ready):
                if time.monotonic() > end or any(p.poll() is not None for p in procs):
                    raise RuntimeError("workers did not get ready")
                time.sleep(0.01)
            t0 = time.monotonic()
            open(go, "w").close()
        else:
            t0 = None
        rcs = [p.wait(timeout=200) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(rcs):
        raise RuntimeError("exit codes %s (logs mg-%s-*.log)" % (rcs, name))
    out = []
    for _, _, args in specs:
        with open(args[args.index("--out") + 1]) as f:
            out.append(json.load(f))
    return t0, out


def _independence(name, sock):
    d = mktemp("nvs-bench-mg-ind.")
    go = os.path.join(d, "go")
    specs = []
    for j in ("0a", "0b", "1a", "1b"):
        specs.append((j, j[0], [os.path.join(GPU_TESTS, "job_add.py"), "--out", os.path.join(d, j + ".json"),
                                "--mib", str(MG_MIB), "--iters", str(MG_ITERS),
                                "--ready-file", os.path.join(d, "ready." + j), "--go-file", go]))
    t0, res = _run_procs(name + "-ind", specs, sock, go)
    return {"gpu0": max(r["end"] for r in res[:2]) - t0, "gpu1": max(r["end"] for r in res[2:]) - t0,
            "correct": all(r["ok"] for r in res), "jobs": [r["elapsed_s"] for r in res]}


def _nccl(name, sock):
    d = mktemp("nvs-bench-mg-nccl.")
    init = os.path.join(d, "init")
    specs = [(str(r), None, [os.path.join(GPU_TESTS, "c9_multi.py"), "nccl", "--rank", str(r), "--world", "2",
                             "--init-file", init, "--mib", str(MG_NCCL_MIB), "--iters", str(MG_NCCL_ITERS),
                             "--out", os.path.join(d, "r%d.json" % r)]) for r in (0, 1)]
    _, res = _run_procs(name + "-nccl", specs, sock)
    return {"seconds": max(r["elapsed_s"] for r in res), "correct": all(r["ok"] for r in res)}


def run_multigpu(R):
    n = _gpu_count()
    if n < 2:
        say("multigpu skipped: %d GPU(s)" % n)
        R["multigpu"] = {"skipped": "%d GPU(s) on this machine" % n}
        return
    out = {"mib": MG_MIB, "iters": MG_ITERS, "reps": MG_REPS, "capacity": MG_CAPACITY,
           "nccl_mib": MG_NCCL_MIB, "nccl_iters": MG_NCCL_ITERS, "gpus": n}
    for kind, fn, extra in (("independence", _independence, {"NVSHARE_GPU_CAPACITY": MG_CAPACITY}),
                            ("nccl", _nccl, {})):
        runs = {"native": [], "nvshare": []}
        for rep in range(MG_REPS):
            for cname in (["native", "nvshare"] if rep % 2 == 0 else ["nvshare", "native"]):
                sched = None
                try:
                    sock = None
                    if cname == "nvshare":
                        sched, sock = _start_sched("%s-%d" % (kind, rep), extra)
                    r = fn("%s-%d" % (cname, rep), sock)
                    say("multigpu %s %s rep %d: %s" % (kind, cname, rep, r))
                    runs[cname].append(r)
                except Exception as ex:  # noqa: BLE001 (reported, the run goes on)
                    say("multigpu %s %s rep %d failed: %s" % (kind, cname, rep, ex))
                    runs[cname].append({"error": str(ex)})
                finally:
                    if sched:
                        _stop(sched)
        out[kind] = runs
    R["multigpu"] = out


def _med(rs, k):
    v = [r[k] for r in rs if "error" not in r]
    return median(v) if v else float("nan")


def _ratios(rs, nat, k):
    """Per-repetition ratios nvshare/native (repetitions paired in order)."""
    return [a[k] / b[k] for a, b in zip(rs, nat) if "error" not in a and "error" not in b and b[k] > 0]


def multigpu_section(mg, meta, L, T):
    L.append("### Several GPUs (`multigpu`)")
    L.append("")
    if mg.get("skipped"):
        L.append("Skipped: %s." % mg["skipped"])
        L.append("")
        return
    L.append("%d GPUs. independence: four jobs at one instant, two per GPU (in-place adds over %d MiB, "
             "%d iterations); nvshare = mode auto with `NVSHARE_GPU_CAPACITY=%s` (GPU 0 below its two "
             "jobs: serialized; GPU 1 above: together). nccl: all-reduce of %d MiB x %d, one process per "
             "GPU; nvshare = mode auto. %d repetitions, configurations interleaved; medians, ratios "
             "paired per repetition (min–max)." % (
                 mg["gpus"], mg["mib"], mg["iters"], mg["capacity"], mg["nccl_mib"], mg["nccl_iters"],
                 mg["reps"]))
    L.append("")
    rows = []
    ind, nc = mg.get("independence", {}), mg.get("nccl", {})
    nat_i, ns_i = ind.get("native", []), ind.get("nvshare", [])
    nat_n, ns_n = nc.get("native", []), nc.get("nvshare", [])

    def cell(rs, nat, k):
        rr = _ratios(rs, nat, k)
        return ("%.3f× (%.3f–%.3f)" % (median(rr), min(rr), max(rr)) if rr else "n/a", rr)

    def ok_all(*groups):
        rs = [r for g in groups for r in g]
        if not rs or any("error" in r for r in rs):
            return "**errors**: " + "; ".join(r["error"] for r in rs if "error" in r)[:200]
        return "yes" if all(r["correct"] for r in rs) else "**NO**"

    c1, r1 = cell(ns_i, nat_i, "gpu1")
    c0, _ = cell(ns_i, nat_i, "gpu0")
    cn, rn = cell(ns_n, nat_n, "seconds")
    rows.append(["GPU 1 pair (fits) while GPU 0 is serialized: makespan", "%.2f s" % _med(nat_i, "gpu1"),
                 "%.2f s" % _med(ns_i, "gpu1"), c1, ok_all(nat_i, ns_i)])
    rows.append(["GPU 0 pair (over its capacity, serialized): makespan", "%.2f s" % _med(nat_i, "gpu0"),
                 "%.2f s" % _med(ns_i, "gpu0"), c0, ok_all(nat_i, ns_i)])
    rows.append(["NCCL all-reduce loop", "%.3f s" % _med(nat_n, "seconds"), "%.3f s" % _med(ns_n, "seconds"),
                 cn, ok_all(nat_n, ns_n)])
    L.append(md_table(["what", "native", "nvshare", "nvshare / native", "results correct"], rows))
    L.append("")
    if r1:
        T["mg_indep"] = ("%.3f×" % median(r1), median(r1) <= 1.05)
    if rn:
        T["mg_nccl"] = ("%.3f×" % median(rn), median(rn) <= 1.05)
