"""Case 9e (two GPUs): limits set for one GPU apply on that GPU only.

  c9_limits.py --out F --ready-file R --go-file G --limit-mib M --seconds S

One process on cuda:0 and cuda:1. Phase 1, before any limit: the rate of a
fixed step (4 bf16 4096^2 matmuls, then a synchronize) on each GPU alone,
S/2 seconds each. It then writes its pid to R and waits for G: meanwhile the test sets
a compute limit and a memory limit of M MiB for this pid on GPU 1 only
(nvsharectl --set-client PID -g 1). Phase 2: waits until cuMemGetInfo on
cuda:1 reports M MiB in all (the limit arrived), measures each GPU's rate again
(S seconds each), and tries an allocation of 1.5 x M MiB on each GPU.

The step's rate after / before on a GPU is the share of the GPU's time the
process got there: about the compute limit on GPU 1, about 1 on GPU 0.
Exit 77 when torch or two GPUs are missing.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, now, prereq_missing, wait_file, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--ready-file", required=True)
ap.add_argument("--go-file", required=True)
ap.add_argument("--limit-mib", type=int, default=1024)
ap.add_argument("--seconds", type=float, default=6.0)
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    prereq_missing("torch: %s" % e)
if torch.cuda.device_count() < 2:
    prereq_missing("two visible GPUs needed, %d seen" % torch.cuda.device_count())

devs = [torch.device("cuda:0"), torch.device("cuda:1")]
mats = [torch.randn(4096, 4096, dtype=torch.bfloat16, device=d) for d in devs]
outs = [torch.empty_like(m) for m in mats]


def rate(i, seconds):
    """Steps per second on GPU i over `seconds`."""
    d, a, o = devs[i], mats[i], outs[i]
    torch.cuda.synchronize(d)
    n, t0 = 0, now()
    while now() - t0 < seconds:
        for _ in range(4):
            torch.matmul(a, a, out=o)
        torch.cuda.synchronize(d)
        n += 1
    return n / (now() - t0)


def try_alloc(i, mib):
    try:
        x = torch.empty(mib << 20, dtype=torch.uint8, device=devs[i])
        x.fill_(1)
        torch.cuda.synchronize(devs[i])
        del x
        torch.cuda.empty_cache()
        return True
    except torch.cuda.OutOfMemoryError:
        return False


for i in (0, 1):  # warm-up: cuBLAS handles, first kernels
    rate(i, 0.3)
before = [rate(i, args.seconds / 2) for i in (0, 1)]
total_before = [torch.cuda.mem_get_info(i)[1] for i in (0, 1)]
with open(args.ready_file + ".tmp", "w") as f:  # the runner reads the pid from it
    f.write("%d\n" % os.getpid())
os.replace(args.ready_file + ".tmp", args.ready_file)
if not wait_file(args.go_file, 60):
    print("go file never appeared", flush=True)
    sys.exit(1)
limit = args.limit_mib << 20
t0 = time.monotonic()
while torch.cuda.mem_get_info(1)[1] != limit and time.monotonic() - t0 < 10:
    time.sleep(0.05)
limit_seen_s = time.monotonic() - t0
total_after = [torch.cuda.mem_get_info(i)[1] for i in (0, 1)]
after = [rate(i, args.seconds) for i in (0, 1)]
big = args.limit_mib * 3 // 2
alloc = [try_alloc(i, big) for i in (0, 1)]
res = {"ok": True, "pid": os.getpid(), "rate_before": before, "rate_after": after,
       "share": [after[i] / before[i] if before[i] else 0.0 for i in (0, 1)],
       "mem_total_before": total_before, "mem_total_after": total_after,
       "limit_bytes": limit, "limit_seen_s": limit_seen_s, "alloc_mib": big, "alloc_ok": alloc}
log(res)
write_json(args.out, res)
sys.exit(0)
