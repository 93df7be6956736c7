"""A persistent GPU worker for bench/bench.py.

One process per (configuration, slot): it imports PyTorch and creates its CUDA
context once, then runs workloads on command, so that repetitions measure the
workloads rather than Python start-up. Commands arrive as one JSON object per
line on stdin; each gets exactly one JSON reply line on the original stdout
(everything else, including C-level output, goes to stderr). EOF on stdin
ends the process, so a dead orchestrator never leaves workers behind.

Times are CLOCK_MONOTONIC seconds (time.monotonic()), comparable between
processes on one host. Every workload frees its memory and empties PyTorch's
cache at the end, so an idle worker holds (almost) no GPU memory.

Commands (field "op"):
  hello                           versions, device, memory
  warmup                          load the kernels every workload uses
  overhead kind=compute|launch    one timed repetition (single job)
  job workload=add|mm mib iters start_at
                                  a batch job: allocate, compute, verify
  pingpong dir me handoffs margin idle-release hand-offs between two workers
  batch start_at until            back-to-back large matmuls, per-step times
  bursts start_at n period k size interactive bursts of small matmuls
  spin start_at until n sync_every timing
                                  back-to-back bf16 n^3 matmuls; (time, steps)
                                  after every batch, GPU busy intervals from
                                  CUPTI (compute-quota scenario)
  mem action=alloc|free_all mib   keep / drop tensors; mem_get_info after (memory limits)
  h2d_bw mib                       plain managed-memory prefetch bandwidth (driver API
                                  through ctypes): host->device and device->host GB/s
  quit
"""
import json
import math
import os
import sys
import time
import traceback

# The reply channel is a private copy of fd 1; fd 1 itself then points at
# stderr so that stray prints (Python or C) cannot corrupt the protocol.
_reply = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

now = time.monotonic
torch = None
dev = None


def reply(obj):
    _reply.write(json.dumps(obj) + "\n")
    _reply.flush()


def sleep_until(t):
    while True:
        d = t - now()
        if d <= 0:
            return
        time.sleep(min(d, 0.001) if d < 0.005 else d - 0.004)


def sync():
    torch.cuda.synchronize()


def release():
    sync()
    torch.cuda.empty_cache()


def touch(path):
    with open(path, "w") as f:
        f.write("%.9f\n" % now())


def wait_file(path, timeout):
    end = now() + timeout
    while not os.path.exists(path):
        if now() > end:
            raise TimeoutError("no %s after %.0f s" % (os.path.basename(path), timeout))
        time.sleep(0.0002)


# ---------------------------------------------------------------- commands

def op_hello(c):
    global torch, dev
    import torch as _t
    torch = _t
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.cuda.init()
    x = torch.ones(1, device=dev)
    x.add_(1)
    sync()
    free, total = torch.cuda.mem_get_info()
    return {"pid": os.getpid(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0), "free": free, "total": total,
            "preload": os.environ.get("LD_PRELOAD", "")}


def op_warmup(c):
    n = 1024
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    a.mm(a)
    b = torch.randn(n, n, device=dev, dtype=torch.float32)
    b.mm(b)
    b.add_(b)
    x = torch.zeros(1, device=dev)
    for _ in range(100):
        x.add_(1.0)
    b.min().item()
    n = c.get("mm_n", 4096)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    torch.mm(a, a)
    sync()
    del a, b, x
    release()
    return {}


def op_overhead(c):
    kind = c["kind"]
    if kind == "compute":
        n, iters = c["n"], c["iters"]
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
        torch.mm(a, b, out=out)
        sync()
        t0 = now()
        for _ in range(iters):
            torch.mm(a, b, out=out)
        sync()
        t = now() - t0
        del a, b, out
        release()
        return {"seconds": t, "tflops": 2 * n ** 3 * iters / t / 1e12}
    if kind == "launch":
        iters = c["iters"]
        x = torch.zeros(1, device=dev, dtype=torch.float32)
        x.add_(1.0)
        sync()
        x.zero_()
        sync()
        t0 = now()
        for _ in range(iters):
            x.add_(1.0)
        sync()
        t = now() - t0
        ok = x.item() == float(iters)
        del x
        release()
        return {"seconds": t, "us_per_launch": t / iters * 1e6, "correct": ok}
    raise ValueError("unknown overhead kind %r" % kind)


def mm_side(mib):
    """Side of the three fp32 matrices that make up a working set of mib."""
    n = int(math.sqrt(mib * (1 << 20) / 12.0))
    return max(256, n // 256 * 256)


def op_job(c):
    workload, mib, iters = c["workload"], c["mib"], c["iters"]
    sleep_until(c.get("start_at", 0))
    t_start = now()
    marks = []  # after each synchronize: where a slow job lost its time
    if workload == "add":
        # pytorch-add: y += x over two tensors that make up the working set.
        n = mib * (1 << 20) // 8
        x = torch.ones(n, device=dev, dtype=torch.float32)
        y = torch.zeros(n, device=dev, dtype=torch.float32)
        every = c.get("sync_every", 50)
        for i in range(iters):
            y.add_(x)
            if (i + 1) % every == 0:
                sync()
                marks.append(now())
        ok = y.min().item() == y.max().item() == float(iters)
        del x, y
    elif workload == "mm":
        # matmul test: C = A @ B (fp32) over three square matrices.
        n = mm_side(mib)
        g = torch.Generator(device=dev).manual_seed(1)
        a = torch.randn(n, n, device=dev, generator=g)
        b = torch.randn(n, n, device=dev, generator=g) / math.sqrt(n)
        out = torch.empty(n, n, device=dev)
        every = c.get("sync_every", 1)
        for i in range(iters):
            torch.mm(a, b, out=out)
            if (i + 1) % every == 0:
                sync()
                marks.append(now())
        # Check through mat-vec products (no full-size temporaries).
        v = torch.randn(n, 1, device=dev, generator=g)
        r1 = out @ v
        r2 = a @ (b @ v)
        rel = ((r1 - r2).abs().max() / r2.abs().max()).item()
        ok = rel < 1e-3
        del a, b, out, v, r1, r2
    else:
        raise ValueError("unknown workload %r" % workload)
    sync()
    t_end = now()
    release()
    return {"start": t_start, "end": t_end, "seconds": t_end - t_start, "correct": bool(ok),
            "marks": [round(t - t_start, 4) for t in marks]}


def op_pingpong(c):
    """Hand-offs between two workers (me = 0 or 1) under mode on. For each
    hand-off h the holder is h % 2: it works until the other has queued
    (file wait.h) plus `margin` seconds, synchronizes and records t_last,
    then launches nothing. The waiter, once the holder is working
    (holding.h), queues by launching one step, synchronizes and records
    t_first. Latency = t_first - t_last."""
    d, me, handoffs, margin = c["dir"], c["me"], c["handoffs"], c["margin"]
    a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    y = torch.empty(2048, 2048, device=dev, dtype=torch.bfloat16)

    def step(k=1):
        for _ in range(k):
            torch.mm(a, w, out=y)

    step(2)
    sync()
    touch(os.path.join(d, "ready.%d" % me))
    wait_file(os.path.join(d, "ready.%d" % (1 - me)), 60)
    last, first = {}, {}
    for h in range(handoffs):
        f = lambda name: os.path.join(d, "%s.%d" % (name, h))  # noqa: E731
        if h % 2 == me:
            step(2)
            sync()
            touch(f("holding"))
            seen = None
            end = now() + 60
            while True:
                step(4)
                sync()
                t = now()
                if seen is None and os.path.exists(f("wait")):
                    seen = t
                if seen is not None and t - seen >= margin:
                    break
                if t > end:
                    raise TimeoutError("the other worker never queued")
            sync()
            last[h] = now()
            wait_file(f("first"), 60)
        else:
            wait_file(f("holding"), 60)
            touch(f("wait"))
            step(1)
            sync()
            first[h] = now()
            touch(f("first"))
    del a, w, y
    release()
    return {"last": last, "first": first}


def op_batch(c):
    n = c.get("n", 8192)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    torch.mm(a, b, out=out)
    sync()
    sleep_until(c["start_at"])
    steps = []
    until = c["until"]
    while True:
        t0 = now()
        if t0 >= until:
            break
        torch.mm(a, b, out=out)
        t1 = now()  # launch returned: the gate let us through
        sync()
        steps.append((t0, t1, now()))
    del a, b, out
    release()
    return {"steps": steps}


def op_bursts(c):
    size, k = c.get("size", 1024), c.get("k", 10)
    a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    out = torch.empty(size, size, device=dev, dtype=torch.bfloat16)
    bursts = []
    for i in range(c["n"]):
        sleep_until(c["start_at"] + i * c["period"])
        t0 = now()
        for _ in range(k):
            torch.mm(a, a, out=out)
        sync()
        bursts.append((t0, now()))
    del a, out
    release()
    return {"bursts": bursts}


# ------------------------------------------------------------------ fake
# BENCH_FAKE=1: no torch, no GPU; plausible numbers after short sleeps. Lets
# bench/run --selftest exercise the orchestrator and the report anywhere.
FAKE = os.environ.get("BENCH_FAKE") == "1"


def op_spin(c):
    """Matmuls from start_at to until; a progress mark (time, steps) after
    every batch of sync_every, so that the caller can take the rate over any
    sub-interval, and the worker's GPU time, which unlike the work rate does
    not depend on the clock the GPU runs at (a capped job runs at a higher
    boost clock than one that keeps the GPU busy).

    timing "cupti" (default): the kernels' own start and end times from
    CUPTI (torch.profiler), returned as busy intervals; one batch stays
    queued behind the one running, so the GPU is never idle between a
    worker's kernels for lack of work (see spin_cupti).
    timing "events": CUDA events around each matmul, a tiny kernel before
    each start event to take nvshare's launch gate first, and (with
    sync_every 1) a synchronize after each, so that neither a lock wait nor
    nvshare's in-flight cap falls between the events; each mark then also
    carries the summed event time."""
    n, every = c.get("n", 8192), c.get("sync_every", 10)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16) / math.sqrt(n)
    out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    try:
        if c.get("timing", "cupti") == "cupti":
            return spin_cupti(c, a, b, out, every)
        return spin_events(c, a, b, out, every)
    finally:
        del a, b, out
        release()


def spin_events(c, a, b, out, every):
    gate = torch.zeros(1, device=dev)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(every)]
    sync()
    sleep_until(c["start_at"])
    marks, steps, busy = [(now(), 0, 0.0)], 0, 0.0
    # The start event itself is not gated: if the lock is taken away just
    # between the gate kernel and the matmul, the wait for the next grant
    # falls between the events. A matmul of fixed shape cannot take many
    # times its usual time, so such a sample counts as the median kernel
    # time (and is reported as an outlier).
    times, outliers = [], 0
    while now() < c["until"]:
        for e0, e1 in ev:
            gate.add_(1)
            e0.record()
            torch.mm(a, b, out=out)
            e1.record()
        sync()
        for e0, e1 in ev:
            t = e0.elapsed_time(e1) / 1000.0
            med = sorted(times)[len(times) // 2] if len(times) >= 20 else None
            if med is not None and t > 3 * med:
                outliers += 1
                t = med
            elif len(times) < 1000:
                times.append(t)
            busy += t
        steps += every
        marks.append((now(), steps, busy))
    return {"marks": marks, "outliers": outliers, "timing": "events"}


def _kineto_intervals(prof, anchor_name):
    """(anchor start, [(start, end)] of every GPU activity) in seconds on the
    profiler's clock. Prefers the raw Kineto records (fast: no event tree);
    falls back to the public FunctionEvent list."""
    from torch.autograd import DeviceType
    try:
        evs = prof.profiler.kineto_results.events()
        anchor, iv = None, []
        for e in evs:
            name, dt = e.name(), e.device_type()
            start = e.start_ns()
            end = e.end_ns() if hasattr(e, "end_ns") else start + e.duration_ns()
            if name == anchor_name:
                if dt == DeviceType.CPU and anchor is None:
                    anchor = start * 1e-9
                continue  # the annotation's GPU span is not GPU work
            if dt == DeviceType.CUDA and end > start:
                iv.append((start * 1e-9, end * 1e-9))
        if anchor is not None:
            return anchor, iv
    except (AttributeError, TypeError):
        pass
    anchor, iv = None, []
    for e in prof.events():
        if e.name == anchor_name:
            if anchor is None and e.device_type == DeviceType.CPU:
                anchor = e.time_range.start * 1e-6
            continue
        if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start:
            iv.append((e.time_range.start * 1e-6, e.time_range.end * 1e-6))
    if anchor is None:
        raise RuntimeError("profiler: anchor event %r not recorded" % anchor_name)
    return anchor, iv


def merge_intervals(iv, gap=1e-6):
    """Union of [start, end) intervals; touching ones (closer than gap) join."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1] + gap:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


_cupti_warm = False


def spin_cupti(c, a, b, out, every):
    """The GPU time measured where it happens: CUPTI's activity records of the
    worker's kernels (torch.profiler with CUDA activity) carry each kernel's
    start and end on the GPU, so nothing the host does between launches (a
    wait for nvshare's lock, its in-flight cap) can land inside a sample.
    The host keeps one batch queued behind the running one (it waits for the
    previous batch's event, not for the GPU to empty), as a training loop
    does. A CPU-side anchor maps the profiler's clock to time.monotonic()."""
    from torch.profiler import ProfilerActivity, profile, record_function
    global _cupti_warm
    if not _cupti_warm:
        # The first profiling session of a process starts slowly (CUPTI
        # starting up, ~2.5 s on an H200): one short session first.
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            for _ in range(20):
                torch.mm(a, b, out=out)
            sync()
        _cupti_warm = True
    done = [torch.cuda.Event(), torch.cuda.Event()]
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        m0 = now()
        with record_function("nvs_anchor"):
            pass
        m0 = (m0 + now()) / 2
        sleep_until(c["start_at"])
        marks, k = [(now(), 0)], 0
        while now() < c["until"]:
            for _ in range(every):
                torch.mm(a, b, out=out)
            done[k % 2].record()
            if k:
                done[(k - 1) % 2].synchronize()
                marks.append((now(), every * k))
            k += 1
        sync()
        marks.append((now(), every * k))
    anchor, iv = _kineto_intervals(prof, "nvs_anchor")
    off = anchor - m0
    busy = merge_intervals([(s - off, e - off) for s, e in iv])
    return {"marks": marks, "busy": [[round(s, 7), round(e, 7)] for s, e in busy],
            "kernels": len(iv), "timing": "cupti"}


_held = []


def op_mem(c):
    """Memory-limit steps (compute-quota scenario): action alloc (mib: keep a
    tensor of that size; an out-of-memory error is a result, not a failure)
    or free_all; replies with torch.cuda.mem_get_info() after the step."""
    ok, err = True, None
    if c["action"] == "alloc":
        try:
            _held.append(torch.empty(c["mib"] << 20, dtype=torch.uint8, device=dev))
        except torch.OutOfMemoryError as e:
            ok, err = False, str(e).splitlines()[0][:200]
    elif c["action"] == "free_all":
        _held.clear()
        release()
    free, total = torch.cuda.mem_get_info()
    return {"allocated": ok, "error": err, "free": free, "total": total,
            "held_mib": sum(t.numel() for t in _held) >> 20}


def op_h2d_bw(c):
    """cuMemPrefetchAsync_v2 of one managed buffer: populate on the GPU, time
    GPU -> host, then host -> GPU (the swap-in reference)."""
    import ctypes
    torch.cuda.synchronize()
    cu = ctypes.CDLL("libcuda.so.1")

    class Loc(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    def ck(r, what):
        if r != 0:
            raise RuntimeError("%s failed: CUresult %d" % (what, r))
    n = int(c["mib"]) << 20
    p = ctypes.c_uint64()
    ck(cu.cuMemAllocManaged(ctypes.byref(p), ctypes.c_size_t(n), 1), "cuMemAllocManaged")
    dev, host = Loc(1, torch.cuda.current_device()), Loc(2, 0)
    pf = cu.cuMemPrefetchAsync_v2
    pf.argtypes = [ctypes.c_uint64, ctypes.c_size_t, Loc, ctypes.c_uint, ctypes.c_void_p]
    try:
        def move(loc):
            t = now()
            ck(pf(p.value, n, loc, 0, None), "cuMemPrefetchAsync_v2")
            ck(cu.cuCtxSynchronize(), "cuCtxSynchronize")
            return now() - t
        move(dev)
        d2h = move(host)
        h2d = move(dev)
    finally:
        cu.cuMemFree_v2(p)
    return {"bytes": n, "h2d_gbps": n / h2d / 1e9, "d2h_gbps": n / d2h / 1e9}


def fake_op(c):
    import random
    op = c["op"]
    slow = 1.0 + (0.004 if os.environ.get("LD_PRELOAD") else 0.0)
    if op == "hello":
        return {"pid": os.getpid(), "torch": "fake", "torch_cuda": "fake", "device": "fake",
                "free": 80 << 30, "total": 80 << 30, "preload": os.environ.get("LD_PRELOAD", "")}
    if op == "warmup":
        return {}
    if op == "overhead":
        t = (0.02 if c["kind"] == "compute" else 0.01) * slow * random.uniform(0.99, 1.01)
        time.sleep(t)
        return {"seconds": t, "correct": True}
    if op == "job":
        sleep_until(c.get("start_at", 0))
        t0 = now()
        time.sleep(0.01 * random.uniform(1, 1.1))
        return {"start": t0, "end": now(), "seconds": now() - t0, "correct": True}
    if op == "pingpong":
        base = now()
        mine = range(c["me"], c["handoffs"], 2)
        return {"last": {str(h): base + h for h in mine},
                "first": {str(h): base + h + 0.02 + 0.001 * h for h in range(1 - c["me"], c["handoffs"], 2)}}
    if op == "batch":
        sleep_until(c["until"])
        t, steps = c["start_at"], []
        while t < c["until"]:
            steps.append((t, t + 0.0001, t + 0.0015))
            t += 0.0016
        return {"steps": steps}
    if op == "bursts":
        sleep_until(c["start_at"] + c["n"] * c["period"])
        return {"bursts": [(c["start_at"] + i * c["period"], c["start_at"] + i * c["period"] + 0.003)
                           for i in range(c["n"])]}
    if op == "mem":
        return {"allocated": True, "error": None, "free": 1 << 30, "total": 1 << 30, "held_mib": 0}
    if op == "h2d_bw":
        return {"bytes": c["mib"] << 20, "h2d_gbps": 50.0, "d2h_gbps": 4.5}
    if op == "spin":
        sleep_until(c["until"])
        share = float(os.environ.get("BENCH_FAKE_SHARE", "1"))
        ts = [c["start_at"] + 0.1 * i for i in range(int((c["until"] - c["start_at"]) / 0.1) + 1)]
        return {"marks": [(t, int(100 * i * share), 0.1 * i * share) for i, t in enumerate(ts)],
                "busy": [[t, t + 0.1 * share] for t in ts], "timing": "fake"}
    raise ValueError(op)


OPS = {"hello": op_hello, "warmup": op_warmup, "overhead": op_overhead, "job": op_job,
       "pingpong": op_pingpong, "batch": op_batch, "bursts": op_bursts, "spin": op_spin,
       "h2d_bw": op_h2d_bw, "mem": op_mem}


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            c = json.loads(line)
        except ValueError as e:
            reply({"ok": False, "error": "bad command: %s" % e})
            continue
        if c.get("op") == "quit":
            reply({"ok": True})
            break
        try:
            if FAKE:
                r = fake_op(c)
            else:
                if c.get("op") != "hello" and torch is None:
                    op_hello({})
                r = OPS[c["op"]](c)
            r["ok"] = True
        except Exception as e:
            traceback.print_exc()
            r = {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e)[:300])}
            try:
                torch is not None and release()
            except Exception:
                pass
        r["op"] = c.get("op")
        reply(r)


if __name__ == "__main__":
    main()
