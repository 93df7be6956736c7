"""Scenario overhead: one job alone, native vs nvshare auto (ungated: its
memory fits) vs on (it holds the lock), compute-bound and launch-bound;
and its report section."""
from benchlib import cell_ratio, cell_time, md_table, median, ratios
from config import (LIMIT, OVERHEAD_LAUNCH_ITERS, OVERHEAD_MM_ITERS, OVERHEAD_MM_N, REPS_OVERHEAD,
                    TIME_SCALE)
from orchestration import pair_call
from progress import say


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


def overhead_section(o, meta, L, T):
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
