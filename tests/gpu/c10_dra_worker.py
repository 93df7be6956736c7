"""Case 10 worker: one container's process of a DRA claim (c10_dra.py runs it).

  c10_dra_worker.py --out F [--ready-file R --go-file G] --seconds S [--limit-mib M]

Under LD_PRELOAD=libnvshare.so on the claim's Pod socket (c10_dra.py sets
NVSHARE_SOCK_DIR to the directory the claim's CDI spec mounts), or natively
for the baseline (no --limit-mib, no ready/go files). It records what
PyTorch sees of the GPU's memory (mem_get_info total: the claim's memory),
allocates half of the limit (must work) and 1.5 x the limit (must raise
OutOfMemoryError), checks results against the CPU (a float32 matmul within
1e-3, an elementwise add exactly), writes its pid to R and waits for G, then
measures the rate of a fixed step (4 bf16 2048^2 matmuls, then a
synchronize) over S seconds: against the native baseline, the share of the
GPU's time the claim's cores gave it. Exit 77 when torch is missing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, now, prereq_missing, wait_file, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--ready-file")
ap.add_argument("--go-file")
ap.add_argument("--seconds", type=float, default=6.0)
ap.add_argument("--limit-mib", type=int, default=0, help="the claim's memory; 0: baseline")
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    prereq_missing("torch: %s" % e)

MiB = 1 << 20
dev = torch.device("cuda")
res = {"pid": os.getpid()}
free, total = torch.cuda.mem_get_info()
res["mem_total"] = total
oom_type = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def try_alloc(mib):
    try:
        x = torch.empty(mib * MiB, dtype=torch.uint8, device=dev)
        x.fill_(1)
        torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()
        return "ok"
    except oom_type:
        torch.cuda.empty_cache()
        return "OutOfMemoryError"
    except Exception as e:  # anything else is a failure, named
        return "%s: %s" % (type(e).__name__, str(e)[:160])


if args.limit_mib:
    res["alloc_half"] = try_alloc(args.limit_mib // 2)
    res["alloc_over"] = try_alloc(args.limit_mib * 3 // 2)

# Results: the same numbers on the GPU and on the CPU.
g = torch.Generator().manual_seed(1234)
a = torch.randn(512, 512, generator=g)
b = torch.randn(512, 512, generator=g)
mm = (a.to(dev) @ b.to(dev)).cpu()
add = (a.to(dev) + b.to(dev)).cpu()
res["matmul_max_err"] = float((mm - a @ b).abs().max())
res["add_exact"] = bool(torch.equal(add, a + b))
res["results_ok"] = res["matmul_max_err"] < 1e-3 and res["add_exact"]

m = torch.randn(2048, 2048, dtype=torch.bfloat16, device=dev)
o = torch.empty_like(m)


def rate(seconds):
    torch.cuda.synchronize()
    n, t0 = 0, now()
    while now() - t0 < seconds:
        for _ in range(4):
            torch.matmul(m, m, out=o)
        torch.cuda.synchronize()
        n += 1
    return n / (now() - t0)


rate(0.3)  # warm-up: cuBLAS handle, first kernels
if args.ready_file:
    with open(args.ready_file + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.replace(args.ready_file + ".tmp", args.ready_file)
    if not wait_file(args.go_file, 120):
        print("go file never appeared", flush=True)
        sys.exit(1)
res["rate"] = rate(args.seconds)
log(res)
write_json(args.out, res)
