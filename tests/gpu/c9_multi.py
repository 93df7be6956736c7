"""Case 9 (two GPUs): one process on both GPUs, and NCCL between two processes.

  c9_multi.py both --out F --mib M --iters I
      x on cuda:0 and y on cuda:1; every iteration adds 1 to both and
      copies a slice of x to cuda:1 and back, so each step needs both GPUs'
      locks in turn. Checks every element at the end (exact in float32).
  c9_multi.py nccl --out F --rank R --world 2 --init-file PATH --mib M --iters I
      one process per GPU (cuda:R); all_reduce(SUM) of a tensor filled with
      R + 1, --iters times; checks the sum and times the loop.

Writes its JSON result (ok, timings) to --out; exit 77 when torch, two GPUs
or NCCL are missing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, now, prereq_missing, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("role", choices=["both", "nccl"])
ap.add_argument("--out", required=True)
ap.add_argument("--mib", type=int, default=256)
ap.add_argument("--iters", type=int, default=200)
ap.add_argument("--rank", type=int, default=0)
ap.add_argument("--world", type=int, default=2)
ap.add_argument("--init-file", default="")
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    prereq_missing("torch: %s" % e)
if torch.cuda.device_count() < 2 and args.role == "both":
    prereq_missing("two visible GPUs needed, %d seen" % torch.cuda.device_count())

n = args.mib * (1 << 20) // 4


def both():
    d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
    x = torch.zeros(n, dtype=torch.float32, device=d0)
    y = torch.zeros(n, dtype=torch.float32, device=d1)
    k = min(n, 1 << 20)
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    t0 = now()
    for _ in range(args.iters):
        x.add_(1.0)
        y.add_(1.0)
        # A round trip through the other GPU: peer copies under the gate.
        s = x[:k].to(d1)
        s.add_(1.0)
        x[:k].copy_(s.to(d0))
        x[:k].sub_(1.0)
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    t1 = now()
    want = float(args.iters)
    ok = (x.min().item() == x.max().item() == want and
          y.min().item() == y.max().item() == want)
    return {"ok": ok, "x": [x.min().item(), x.max().item()], "y": [y.min().item(), y.max().item()],
            "start": t0, "end": t1, "elapsed_s": t1 - t0}


def nccl():
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_nccl_available():
        prereq_missing("torch.distributed with NCCL")
    torch.cuda.set_device(args.rank)
    dist.init_process_group("nccl", init_method="file://" + args.init_file,
                            rank=args.rank, world_size=args.world)
    dev = torch.device("cuda:%d" % args.rank)
    t = torch.empty(n, dtype=torch.float32, device=dev)
    want = float(sum(range(1, args.world + 1)))
    ok = True
    t.fill_(args.rank + 1.0)
    dist.all_reduce(t)  # warm-up: communicator set-up is not timed
    torch.cuda.synchronize(dev)
    ok = ok and t.min().item() == t.max().item() == want
    dist.barrier()
    t0 = now()
    for _ in range(args.iters):
        t.fill_(args.rank + 1.0)
        dist.all_reduce(t)
    torch.cuda.synchronize(dev)
    t1 = now()
    ok = ok and t.min().item() == t.max().item() == want
    dist.destroy_process_group()
    return {"ok": ok, "sum": t.max().item(), "want": want, "start": t0, "end": t1,
            "elapsed_s": t1 - t0, "iters": args.iters, "mib": args.mib, "rank": args.rank}


res = both() if args.role == "both" else nccl()
res["pid"] = os.getpid()
log(res)
write_json(args.out, res)
sys.exit(0 if res["ok"] else 1)
