"""Scenario interactive: bursts of small matmuls beside a batch job of large
ones; burst latency, the batch's throughput and how long a burst's end holds
the batch up; and its report section."""
import time

from benchlib import fmt_ms, md_table, pct
from config import (BATCH_N, BURST_K, BURST_PERIOD, BURST_SIZE, BURSTS, CMD_TIMEOUT, LEAD_IN,
                    TQ_INTERACTIVE)
from orchestration import pair_call


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


def interactive_section(it, meta, L, T):
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
