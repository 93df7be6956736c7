"""nvshare benchmark orchestrator (run it through bench/run).

Starts one scheduler per nvshare configuration (private socket directories)
and two persistent GPU workers (bench/worker.py) per configuration, native
included; then runs the scenarios, interleaving configurations repetition by
repetition so that clock drift hits all of them alike; prints a Markdown
report, writes it to $BENCH_LOGDIR/bench.md (+ results.json) and into
docs/BENCHMARKS.md between <!-- bench:begin --> and <!-- bench:end -->.

This file is the run from start to end; the parts live in bench/lib/
(config.py: every BENCH_* knob and every assumption about nvshare's
interfaces). This process never imports torch. See bench/README.md.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import config  # noqa: E402
import orchestration  # noqa: E402
import progress  # noqa: E402
from benchlib import replace_section  # noqa: E402
from config import (BUDGET_PCT, CMD_TIMEOUT, DEADLINE, DEFAULT_SCENARIOS, LIB, NORMAL_MIB,  # noqa: E402
                    OVERHEAD_MM_N, PRESSURE_CAP_FRACTION, ROOT, SCENARIOS, SCHED_BIN, SMALL_MIB,
                    WORKER_START_TIMEOUT)
from idle import run_idle  # noqa: E402
from interactive import run_interactive  # noqa: E402
from multigpu import MG_COST, run_multigpu  # noqa: E402
from notebooks import NB_COST, run_notebooks  # noqa: E402
from orchestration import broadcast, make_configs, start_sched, start_workers  # noqa: E402
from overhead import run_overhead  # noqa: E402
from plan import plan_dry  # noqa: E402
from probe import detect_swap_env, query_gpu  # noqa: E402
from progress import left, say  # noqa: E402
from quota import run_quota  # noqa: E402
from report import report  # noqa: E402
from sched_latency import run_sched_latency  # noqa: E402
from swapbench import SWAP_COST, TRAIN_COST, run_swapspeed, run_vmmtrain  # noqa: E402
from two_jobs import run_fit, run_pressure  # noqa: E402

# Rough costs (s) of the scenarios, to skip what no longer fits in the deadline.
COST = {"overhead": 20, "fit": 30, "idle": 10, "interactive": 30, "pressure": 50, "sched_latency": 15,
        "quota": 75, "notebooks": NB_COST, "multigpu": MG_COST, "swapspeed": SWAP_COST,
        "vmmtrain": TRAIN_COST}


def parse_args():
    ap = argparse.ArgumentParser(description="nvshare benchmarks (use bench/run)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--only", default="", help="comma list of: " + ",".join(SCENARIOS))
    ap.add_argument("--no-docs", action="store_true", help="do not touch docs/BENCHMARKS.md")
    ap.add_argument("--command", default="bench/run", help="command line to record")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s] or DEFAULT_SCENARIOS
    bad = [s for s in only if s not in SCENARIOS]
    if bad:
        sys.exit("unknown scenario(s): %s" % ",".join(bad))
    return a, only


def working_sets(gpu):
    """GPU safety: the largest real footprint is the pressure pair (two
    normal working sets) plus idle workers' contexts' leftovers; it must fit
    in BUDGET_PCT of the free memory, or every working set (and the pressure
    capacity) shrinks. Returns budget (MiB), scale, small and normal working
    sets (MiB) and the pressure capacity (NVSHARE_GPU_CAPACITY syntax)."""
    need = 2 * NORMAL_MIB + 512
    budget = gpu["free_mib"] * BUDGET_PCT / 100.0
    scale = min(1.0, budget / need)
    if scale < 0.1:
        sys.exit("only %d MiB free on the GPU: too little to benchmark safely" % gpu["free_mib"])
    small = max(64, int(SMALL_MIB * scale) // 64 * 64)
    normal = max(128, int(NORMAL_MIB * scale) // 64 * 64)
    cap_mib = int(2 * normal * PRESSURE_CAP_FRACTION)
    capacity = "%dMi" % cap_mib if cap_mib % 1024 else "%dGi" % (cap_mib // 1024)
    return budget, scale, small, normal, capacity


def run_scenario(s, C, R, small, normal, dry, gpu=None):
    """Runs scenario s; its results land in R[s]."""
    run = {"overhead": lambda: run_overhead(C, R, ["native", "auto", "on"]),
           "fit": lambda: run_fit(C, R, small),
           "idle": lambda: run_idle(C, R),
           "interactive": lambda: run_interactive(C, R, ["native", "auto", "on_i"]),
           "pressure": lambda: run_pressure(C, R, normal),
           "sched_latency": lambda: run_sched_latency(R, dry),
           "quota": lambda: run_quota(C, R),
           "notebooks": lambda: run_notebooks(R, gpu or {}),
           "multigpu": lambda: run_multigpu(R),
           "swapspeed": lambda: run_swapspeed(R, gpu or {}),
           "vmmtrain": lambda: run_vmmtrain(R, gpu or {})}
    run[s]()


def write_outputs(md, meta, R, no_docs):
    """The report on stdout and in $BENCH_LOGDIR (bench.md, results.json with
    the raw numbers), and into docs/BENCHMARKS.md unless no_docs."""
    print()
    print(md)
    with open(os.path.join(config.LOGDIR, "bench.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(config.LOGDIR, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": R}, f, indent=1, default=str)
    if not no_docs:
        path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
        old = open(path).read() if os.path.exists(path) else "# Benchmarks\n\nWritten by `bench/run`.\n"
        with open(path, "w") as f:
            f.write(replace_section(old, md, "<!-- bench:begin -->", "<!-- bench:end -->"))
        say("wrote %s and %s" % (os.path.relpath(path, ROOT), os.path.join(config.LOGDIR, "bench.md")))


def main():
    a, only = parse_args()
    os.makedirs(config.LOGDIR, exist_ok=True)

    gpu = query_gpu(a.dry_run)
    for f in (LIB, SCHED_BIN):
        if not os.path.exists(f) and not a.dry_run and not config.FAKE:
            sys.exit("missing %s (build first or set NVS_BUILD)" % f)
    budget, scale, small, normal, capacity = working_sets(gpu)
    swap_env = detect_swap_env()
    C = make_configs(only, capacity, swap_env)

    say("GPU %s, free %d MiB; budget %d%% = %d MiB; working sets %d/%d MiB; pressure capacity %s" % (
        gpu["name"], gpu["free_mib"], BUDGET_PCT, budget, small, normal, capacity))
    say("swap switch: %s" % (swap_env or "none found"))
    say("scenarios: %s; deadline %.0f s; logs %s" % (",".join(only), DEADLINE, config.LOGDIR))

    R = {}
    pidfile = os.path.join(config.LOGDIR, "bench.pids")
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
        for s in only:
            if left() < COST[s]:
                say("skipping %s: %.0f s left" % (s, left()))
                R.setdefault("skipped", []).append(s)
                continue
            t = time.monotonic()
            run_scenario(s, C, R, small, normal, a.dry_run, gpu)
            say("%s done in %.1f s (%.0f s left)" % (s, time.monotonic() - t, left()))
    finally:
        for c in C.values():
            for w in c.workers:
                w.stop()
            if c.sched:
                c.sched.stop()
        for d in orchestration.TMPDIRS:
            shutil.rmtree(d, ignore_errors=True)
    if a.dry_run:
        return 0
    md = report(R, meta, C)
    if R.get("skipped"):
        md += "\nSkipped for lack of time: %s.\n" % ", ".join(R["skipped"])
    write_outputs(md, meta, R, a.no_docs)
    say("total %.0f s" % (time.monotonic() - progress.T_START))
    failed = [c.name for c in C.values() if c.error]
    if failed:
        say("configurations with failures: %s (see the report and %s)" % (", ".join(failed), config.LOGDIR))
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
