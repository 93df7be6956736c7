"""Scenarios of issue 32 (the swap engine, docs/swap.md), only with --only:

`swapspeed`: the swap throughput of a hand-off. For each working set S in
BENCH_SWAP_GIB (default 1,8,32 GiB, those that fit the GPU's free memory
with room to spare): a job holding S (bench/swap_worker.py hold) and a job
of 256 MiB share a scheduler (mode auto, NVSHARE_GPU_CAPACITY = S + 128 MiB,
NVSHARE_SWAP_OUT=all, TQ 1 s, the adaptive stretch off) so that every
hand-off moves all of S out and back in. Once the big job's pinned staging
holds S (the status says so), both run BENCH_SWAP_SECONDS; the big job's
swap counters over that time (nvsharectl --json, read when its hold ends,
before its check) give GB/s each way.
Beside it, natively in the same run: cudaMemcpy device <-> pinned host of
min(S, 8 GiB) (pinning 32 GiB more would cost ~25 s). The pattern in S is
checked at the end.

`vmmtrain`: two PyTorch trainings with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (their memory is cuMemCreate
memory, which nvshare now swaps): native one after the other, then both
under nvshare at once with NVSHARE_GPU_CAPACITY = 75 % of their sum. Final
losses and parameter checksums must be bit-identical; makespan against the
native sequence; each client's swap counters and bytes per path.

GPU safety: real footprints are S + 256 MiB + two contexts (swapspeed) and
two trainings of ~2.5 GiB (vmmtrain); sizes that do not fit 90 % of the
free memory are skipped.
"""
import json
import os
import select
import subprocess
import time

import config
from benchlib import md_table, median
from notebooks import _readline, _stop
from orchestration import start_private_sched, tool_env
from progress import say

WORKER = os.path.join(config.BENCH_DIR, "swap_worker.py")
SWAP_GIB = [int(x) for x in config.env("BENCH_SWAP_GIB", "1,8,32").split(",") if x]
SWAP_SECONDS = config.env("BENCH_SWAP_SECONDS", 10.0, float)
TRAIN_STEPS = config.env("BENCH_TRAIN_STEPS", 120, int)
SWAP_COST = 150
TRAIN_COST = 90


def _expect(p, buf, tag, timeout):
    end = time.monotonic() + timeout
    line = _readline(p, buf, end)
    while not line.startswith(tag):
        line = _readline(p, buf, end)
    return json.loads(line.split(" ", 1)[1])


def _spawn(tag, args, env, lifetime):
    log = open(os.path.join(config.LOGDIR, "swap-%s.log" % tag), "ab")
    return (subprocess.Popen(["timeout", "-k", "5", str(int(lifetime)), config.PY, "-u", WORKER] + args,
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                             cwd=config.ROOT), [b""])


def _status(sock):
    r = subprocess.run([config.CTL_BIN, "--json"], env=tool_env(sock), capture_output=True, text=True,
                       timeout=10)
    return json.loads(r.stdout)


def _client(st, pid):
    for c in st.get("clients", []):
        if c.get("pid") == pid and c.get("gpus"):
            return c["gpus"][0]
    return None


def _env(sock=None, extra=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e["PYTHONUNBUFFERED"] = "1"
    if sock:
        e["LD_PRELOAD"] = config.PRELOAD
        e["NVSHARE_SOCK_DIR"] = sock
    e.update(extra or {})
    return e


def _swap_rates(s0, s1):
    """Counters between two status reads of a client's swap (s0, s1): the
    deltas, and GB/s each way (bytes per ns)."""
    d = {k: s1.get(k, 0) - s0.get(k, 0) for k in ("bytes_in", "bytes_out", "ns_in", "ns_out")}
    return {"delta": d, "in_gbps": d["bytes_in"] / d["ns_in"] if d["ns_in"] else 0.0,
            "out_gbps": d["bytes_out"] / d["ns_out"] if d["ns_out"] else 0.0}


def swapspeed_once(gib):
    mib = gib * 1024
    out = {"gib": gib}
    # Native reference first: pinned copies of min(S, 8 GiB).
    procs = [_spawn("pinned-%d" % gib, ["pinned", str(min(mib, 8192))], _env(), 300)]
    try:
        _expect(*procs[0], "READY", 200)
        procs[0][0].stdin.write(b"GO 0\n")
        procs[0][0].stdin.flush()
        out["native"] = _expect(*procs[0], "RESULT", 120)
    finally:
        _stop(procs, None)
    sched, sock = start_private_sched("swap-%d" % gib, {
        "NVSHARE_SCHED_MODE": "auto", "NVSHARE_GPU_CAPACITY": "%dMi" % (mib + 128), "NVSHARE_TQ": "1",
        "NVSHARE_SWAP_OUT": "all", "NVSHARE_SWAP_TQ_FACTOR": "0",
        "NVSHARE_EVENTS": os.path.join(config.LOGDIR, "events-swap-%d.jsonl" % gib)}, SWAP_SECONDS + 400)
    procs = []
    try:
        procs.append(_spawn("big-%d" % gib, ["hold", str(mib)], _env(sock, {"NVSHARE_DEBUG": "1"}),
                            SWAP_SECONDS + 300))
        big = _expect(*procs[0], "READY", 300)
        procs.append(_spawn("small-%d" % gib, ["hold", "256"], _env(sock), SWAP_SECONDS + 300))
        _expect(*procs[1], "READY", 300)
        # Staging pins in the background (~0.7 s per GiB): measure hand-offs
        # once it holds S, as a long-running job would see them.
        t0 = time.monotonic()
        g = None
        while time.monotonic() - t0 < 120:
            g = _client(_status(sock), big["pid"])
            if g and g["swap"].get("staging_bytes", 0) >= max(mib << 20, g["swap"].get("fast_bytes", 0)):
                break
            time.sleep(0.5)
        out["staging_wait_s"] = time.monotonic() - t0
        s0 = g["swap"] if g else {}
        for p, _ in procs:
            p.stdin.write(b"GO %.1f\n" % SWAP_SECONDS)
            p.stdin.flush()
        _expect(*procs[0], "HELD", SWAP_SECONDS + 200)
        s1 = _client(_status(sock), big["pid"])["swap"]
        for p, _ in procs:
            p.stdin.write(b"CHECK\n")
            p.stdin.flush()
        res = [_expect(p, b, "RESULT", SWAP_SECONDS + 200) for p, b in procs]
        rates = _swap_rates(s0, s1)
        d = rates["delta"]
        out.update(rates)
        out.update({"ok": all(r["ok"] for r in res), "paths": {
            k: s1.get(k) for k in ("fast_bytes", "prefetch_bytes", "pinned_bytes", "staging_bytes")},
            "swaps_in": d["bytes_in"] / (mib << 20), "swaps_out": d["bytes_out"] / (mib << 20)})
    finally:
        _stop(procs, sched)
    return out


def run_swapspeed(R, gpu):
    free = gpu.get("free_mib", 0)
    out = {"seconds": SWAP_SECONDS, "runs": []}
    for gib in SWAP_GIB:
        if not config.FAKE and gib * 1024 + 256 + 2048 > 0.9 * free:
            say("swapspeed %d GiB skipped: %d MiB free (GPU safety)" % (gib, free))
            out["runs"].append({"gib": gib, "skipped": "only %d MiB free" % free})
            continue
        try:
            r = swapspeed_once(gib)
            say("swapspeed %d GiB: out %.1f GB/s, in %.1f GB/s (pinned copy %.1f / %.1f), data %s" % (
                gib, r["out_gbps"], r["in_gbps"], r["native"]["d2h_gbps"], r["native"]["h2d_gbps"],
                "intact" if r["ok"] else "BAD"))
            out["runs"].append(r)
        except Exception as ex:  # noqa: BLE001 (reported, the run goes on)
            say("swapspeed %d GiB failed: %s" % (gib, ex))
            out["runs"].append({"gib": gib, "error": str(ex)})
    R["swapspeed"] = out


def swapspeed_section(S, meta, L, T):
    L.append("### Swap throughput of a hand-off (`swapspeed`)")
    L.append("")
    L.append("A job holding S and a job of 256 MiB, capacity S + 128 MiB, `NVSHARE_SWAP_OUT=all`, TQ 1 s "
             "(adaptive stretch off): every hand-off moves all of S out and back. Counted over %.0f s once "
             "the big job's pinned staging held S; GB/s = bytes / time from its swap counters (a swap-out: "
             "wait for calls in flight, copy to staging, discard or release; a swap-in: re-create, copy back, "
             "prefetch walk). Native: `cudaMemcpy` device ↔ pinned host of min(S, 8 GiB) in the same run." %
             S["seconds"])
    L.append("")
    rows, worst = [], None
    for r in S["runs"]:
        if "skipped" in r or "error" in r:
            rows.append(["%d GiB" % r["gib"], r.get("skipped") or "error: %s" % r["error"]] + [""] * 5)
            continue
        n = r["native"]
        ro, ri = r["out_gbps"] / n["d2h_gbps"], r["in_gbps"] / n["h2d_gbps"]
        rows.append(["%d GiB" % r["gib"], "%.1f GB/s (%.0f %%)" % (r["out_gbps"], 100 * ro),
                     "%.1f GB/s (%.0f %%)" % (r["in_gbps"], 100 * ri),
                     "%.1f / %.1f GB/s" % (n["d2h_gbps"], n["h2d_gbps"]),
                     "%.1f / %.1f" % (r["swaps_out"], r["swaps_in"]), "%.0f s" % r["staging_wait_s"],
                     "intact" if r["ok"] else "**BAD**"])
        low = min(r["out_gbps"], r["in_gbps"], 1e9)
        frac = min(ro, ri)
        if worst is None or low < worst[0]:
            worst = (low, frac, r["gib"], r["ok"])
    L.append(md_table(["S", "out (vs pinned copy)", "in (vs pinned copy)", "pinned copy d2h / h2d",
                       "swaps out / in", "staging pinned after", "data"], rows))
    L.append("")
    if worst:
        T["swapspeed"] = ("worst %.1f GB/s (%d GiB), %.0f %% of the pinned copy" % (worst[0], worst[2],
                                                                                  100 * worst[1]),
                          worst[0] >= 40 and worst[1] >= 0.75 and worst[3])


def _train(tag, sock, steps, extra_env, procs):
    e = _env(sock, dict({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                         "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}, **(extra_env or {})))
    procs.append(_spawn(tag, ["train", str(steps)], e, 600))
    return _expect(*procs[-1], "READY", 300)


def run_vmmtrain(R, gpu):
    out = {"steps": TRAIN_STEPS}
    if not config.FAKE and gpu.get("free_mib", 0) < 12000:
        R["vmmtrain"] = {"skipped": "only %d MiB free" % gpu.get("free_mib", 0)}
        return
    try:
        nat = []
        for i in range(2):  # native, one after the other
            procs = []
            try:
                info = _train("train-native-%d" % i, None, TRAIN_STEPS, None, procs)
                procs[0][0].stdin.write(b"GO 0\n")
                procs[0][0].stdin.flush()
                r = _expect(*procs[0], "RESULT", 400)
                r["ready"] = info
                nat.append(r)
            finally:
                _stop(procs, None)
        out["native"] = nat
        cap = int(0.75 * sum(r["reserved_mib"] for r in nat))
        out["capacity_mib"] = cap
        sched, sock = start_private_sched("vmmtrain", {
            "NVSHARE_SCHED_MODE": "auto", "NVSHARE_GPU_CAPACITY": "%dMi" % cap, "NVSHARE_TQ": "1",
            "NVSHARE_EVENTS": os.path.join(config.LOGDIR, "events-vmmtrain.jsonl")}, 700)
        procs = []
        try:
            infos = [_train("train-nvshare-%d" % i, sock, TRAIN_STEPS, {"NVSHARE_DEBUG": "1"}, procs)
                     for i in range(2)]
            # Serialized now: both pin their staging in the background. A
            # long training sees its hand-offs with it in place; wait for it
            # (swapspeed does the same) so the run is not its start-up.
            t1, last, since = time.monotonic(), None, time.monotonic()
            while time.monotonic() - t1 < 60:
                st = _status(sock)
                gs = [g["gpus"][0]["swap"] for g in st.get("clients", []) if g.get("gpus")]
                held = [x.get("staging_bytes", 0) for x in gs]
                if len(gs) == 2 and all(x.get("staging_bytes", 0) >= x.get("fast_bytes", 1) > 0 for x in gs):
                    break
                if held != last:
                    last, since = held, time.monotonic()
                elif len(gs) == 2 and min(held) > 0 and time.monotonic() - since > 3:
                    break  # grown as far as it will (a bound, or a refusal)
                time.sleep(0.5)
            out["staging_wait_s"] = time.monotonic() - t1
            # The run's own hand-offs: counters from GO on (the start-up's
            # hand-offs, before the staging held the memory, are not the run).
            pids = [i["pid"] for i in infos]
            st = _status(sock)
            s0 = {pid: (_client(st, pid) or {}).get("swap", {}) for pid in pids}
            t0 = time.monotonic()
            for p, _ in procs:
                p.stdin.write(b"GO 0\n")
                p.stdin.flush()
            res = [_expect(p, b, "RESULT", 500) for p, b in procs]
            out["makespan"] = time.monotonic() - t0
            st = _status(sock)
            out["clients"] = []
            for pid in pids:
                s1 = (_client(st, pid) or {}).get("swap", {})
                out["clients"].append(dict(s1, **_swap_rates(s0[pid], s1)))
            out["nvshare"] = res
            out["ready"] = infos
            out["grants"] = sum(1 for line in open(os.path.join(config.LOGDIR, "events-vmmtrain.jsonl"))
                                if '"event":"lock_ok"' in line)
        finally:
            _stop(procs, sched)
    except Exception as ex:  # noqa: BLE001
        say("vmmtrain failed: %s" % ex)
        out["error"] = str(ex)
    R["vmmtrain"] = out
    if "makespan" in out:
        seq = sum(r["elapsed"] for r in out["native"])
        same = all(a["loss"] == b["loss"] and a["checksum"] == b["checksum"]
                   for a, b in zip(out["native"], out["nvshare"]))
        say("vmmtrain: makespan %.2f s vs native sequence %.2f s (%.3fx), results %s" % (
            out["makespan"], seq, out["makespan"] / seq, "identical" if same else "DIFFERENT"))


def vmmtrain_section(V, meta, L, T):
    L.append("### Two `expandable_segments` trainings over capacity (`vmmtrain`)")
    L.append("")
    if V.get("skipped") or V.get("error"):
        L.append("Not run: %s." % (V.get("skipped") or V.get("error")))
        L.append("")
        return
    seq = sum(r["elapsed"] for r in V["native"])
    same = all(a["loss"] == b["loss"] and a["checksum"] == b["checksum"]
               for a, b in zip(V["native"], V["nvshare"]))
    L.append("Two trainings (8 × Linear 4096 + GELU, Adam, batch 2048, %d steps, deterministic) with "
             "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`: natively one after the other, then "
             "together under nvshare (mode auto, capacity %d MiB = 75 %% of their reserved memory, TQ 1 s), "
             "started once both held their pinned staging (%.1f s after both were ready)." %
             (V["steps"], V["capacity_mib"], V.get("staging_wait_s", 0)))
    L.append("")
    rows = [["native, one after the other", "%.2f s" % seq, "1.000×", "", "", ""],
            ["nvshare, together", "%.2f s" % V["makespan"], "%.3f×" % (V["makespan"] / seq),
             "%d grants" % V["grants"],
             "; ".join("in %.2f GiB at %.1f GB/s, out %.2f GiB at %.1f GB/s, VMM fast %.2f GiB" % (
                 c["delta"]["bytes_in"] / 2**30, c["in_gbps"], c["delta"]["bytes_out"] / 2**30, c["out_gbps"],
                 c.get("fast_bytes", 0) / 2**30)
                 for c in V["clients"]),
             "identical" if same else "**different**"]]
    L.append(md_table(["run", "makespan", "vs native sequence", "hand-offs", "per client: swapped, VMM bytes",
                       "loss and parameters vs native"], rows))
    L.append("")
    swapped = all(c["delta"]["bytes_out"] > 0 and c["delta"]["bytes_in"] > 0 for c in V["clients"]) \
        and len(V["clients"]) == 2
    if swapped:
        low = min(min(c["in_gbps"], c["out_gbps"]) for c in V["clients"])
        T["vmmtrain_swap"] = ("slowest direction of either client %.1f GB/s" % low, low >= 40)
    T["vmmtrain"] = ("%.3f× native sequence, results %s, both swapped: %s" % (
        V["makespan"] / seq, "identical" if same else "DIFFERENT", "yes" if swapped else "no"),
        V["makespan"] / seq <= 1.05 and same and swapped)


__all__ = ["run_swapspeed", "swapspeed_section", "run_vmmtrain", "vmmtrain_section", "SWAP_COST",
           "TRAIN_COST", "median"]
