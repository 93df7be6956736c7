"""One process of the `notebooks` scenario (bench/lib/notebooks.py).

    notebook_worker.py ROLE MIB

ROLE batch: back-to-back steps; notebook: bursts of BURST steps, then IDLE s
idle. A step = 8 bf16 4096x4096 matmuls plus one pass over the process's
buffer (MIB in all, operands included), synchronized. The process warms up,
prints READY, reads "GO T0 SECONDS IDLE BURST PHASE" (T0: CLOCK_MONOTONIC
seconds, shared by all processes of a run), runs until T0 + SECONDS and
prints "RESULT {json}". Burst latency = end of the idle period -> first
step done (synchronized). BENCH_FAKE=1: no GPU, steps are sleeps.
"""
import json
import os
import sys
import time

role, mib = sys.argv[1], int(sys.argv[2])
FAKE = os.environ.get("BENCH_FAKE") == "1"
N = 4096

if FAKE:
    def step():
        time.sleep(0.003)

    def sync():
        pass
    info = {"torch": "fake"}
else:
    import torch
    dev = "cuda"
    a = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
    b = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    rest = max(1 << 20, (mib << 20) - 3 * a.numel() * 2)
    buf = torch.zeros(rest // 2, device=dev, dtype=torch.bfloat16)

    def step():
        for _ in range(8):
            torch.matmul(a, b, out=c)
        buf.add_(1)

    def sync():
        torch.cuda.synchronize()
    info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda}

for _ in range(3):
    step()
sync()
print("READY " + json.dumps(info), flush=True)
go = sys.stdin.readline().split()
t0, secs, idle, burst, phase = float(go[1]), float(go[2]), float(go[3]), int(go[4]), float(go[5])
end = t0 + secs
while time.monotonic() < t0:
    time.sleep(0.0005)
res = {"role": role, "mib": mib}
if role == "batch":
    steps = 0
    while time.monotonic() < end:
        step()
        sync()
        steps += 1
    res["steps"] = steps
    res["elapsed"] = time.monotonic() - t0
else:
    lat, done = [], []
    time.sleep(phase)
    while True:
        t_wake = time.monotonic()
        if t_wake >= end:
            break
        step()
        sync()
        t_first = time.monotonic()
        for _ in range(burst - 1):
            step()
        sync()
        t_done = time.monotonic()
        if t_done > end:
            break
        lat.append(t_first - t_wake)
        done.append(t_done - t0)
        time.sleep(idle)
    res["lat"], res["done"] = lat, done
print("RESULT " + json.dumps(res), flush=True)
