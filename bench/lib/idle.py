"""Scenario idle: under mode on, two workers hand the lock back and forth;
measured is how long the waiter waits after the holder's last kernel (the
idle release), and its report section."""
from benchlib import fmt_ms, md_table, median
from config import PINGPONG_HANDOFFS, PINGPONG_MARGIN
from orchestration import mktemp, pair_call


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


def idle_section(i, meta, L, T):
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
