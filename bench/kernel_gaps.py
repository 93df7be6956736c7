"""Where a compute-bound loop's GPU time goes, from the GPU's side.

Back-to-back bf16 8192^3 matmuls (batches of 8, a synchronize every 64) for
2.5 s under torch.profiler, twice; prints per session the matmul rate, the
CUPTI kernel records (name, median/p10/p90 duration), the GPU busy share of
the span, and the gaps between consecutive kernels. Run it natively and
under the preload (with a scheduler running) to compare, e.g.

    python3 bench/kernel_gaps.py
    LD_PRELOAD=$PWD/build/libnvshare.so python3 bench/kernel_gaps.py

(docs/BENCHMARKS.md, "Reading" under the run history).
"""
import sys, time, math, collections
import torch
from torch.profiler import profile, ProfilerActivity
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) / math.sqrt(n)
out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(50): torch.mm(a, b, out=out)
torch.cuda.synchronize()
for sess in range(2):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.monotonic(); k = 0
        while time.monotonic() - t0 < 2.5:
            for _ in range(8): torch.mm(a, b, out=out)
            k += 8
            if k % 64 == 0: torch.cuda.synchronize()
        torch.cuda.synchronize(); t1 = time.monotonic()
    evs = prof.profiler.kineto_results.events()
    from torch.autograd import DeviceType
    iv = sorted((e.start_ns(), e.end_ns(), e.name()) for e in evs if e.device_type() == DeviceType.CUDA)
    names = collections.Counter(x[2][:60] for x in iv)
    durs = collections.defaultdict(list)
    for s, e, nm in iv: durs[nm[:60]].append((e - s) / 1e3)
    gaps = [(iv[i+1][0] - iv[i][1]) / 1e3 for i in range(len(iv) - 1)]
    gaps.sort()
    span = (iv[-1][1] - iv[0][0]) / 1e9
    busy = sum(e - s for s, e, _ in iv) / 1e9
    print("session %d: %d matmuls in %.3f s (%.1f/s); %d records; busy %.4f s of span %.4f s = %.2f%%" % (sess, k, t1 - t0, k / (t1 - t0), len(iv), busy, span, 100 * busy / span))
    for nm, c in names.items():
        d = sorted(durs[nm]); print("  kernel %-60s x%d  median %.1f us  p10 %.1f p90 %.1f" % (nm, c, d[len(d)//2], d[len(d)//10], d[9*len(d)//10]))
    print("  gaps us: p10 %.1f median %.1f p90 %.1f p99 %.1f max %.1f; sum %.4f s" % (gaps[len(gaps)//10], gaps[len(gaps)//2], gaps[9*len(gaps)//10], gaps[99*len(gaps)//100], gaps[-1], sum(gaps)/1e6))
