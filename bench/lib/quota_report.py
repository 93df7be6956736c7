"""The quota scenario's report section: how shares were measured, one
table of the capped cases (worst error per case), one of the other cases,
the memory-limit line, and the quota targets."""
import config
from benchlib import md_table
from config import LIMIT, QUOTA_MEASURE, QUOTA_MM_N, QUOTA_SKIP, QUOTA_WINDOW_MS


def quota_section(q, meta, L, T):
    L.append("### Compute quotas")
    L.append("")
    timing = q.get("timing_used", q.get("timing"))
    if timing == "events":
        how = ("the summed duration of its matmul kernels (CUDA events around each, a synchronize "
               "after every %d) / wall time" % config.QUOTA_SYNC)
    else:
        how = ("the time its kernels ran on the GPU (start and end of every kernel from CUPTI, "
               "through torch.profiler; batches of %d matmuls, one batch queued behind the "
               "running one) / wall time" % config.QUOTA_SYNC)
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
