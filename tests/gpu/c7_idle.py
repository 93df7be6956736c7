"""Case 7: idle release under mode "on".

Two processes, roles A and B, coordinate through files in --dir:
  both   warm up (kernels loaded, cuBLAS ready), write warm.<role>
  A      waits for warm.B, then launches work without pause (it holds the
         lock), writes holding.A, keeps working until wait.B exists plus
         --margin seconds, synchronizes, records t_last (its last kernel has
         completed), then sleeps --idle seconds launching nothing.
  B      waits for holding.A, writes wait.B, launches one step (blocks at the
         gate until A's lock is released), synchronizes, records t_first.
The runner reports t_first(B) - t_last(A).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, now, prereq_missing, touch, wait_file, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--role", choices=["A", "B"], required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--margin", type=float, default=0.3)
ap.add_argument("--idle", type=float, default=3.0)
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    prereq_missing("torch: %s" % e)

D = args.dir
dev = torch.device("cuda")
a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
y = torch.empty(2048, 2048, device=dev, dtype=torch.bfloat16)


def step(n=1):
    for _ in range(n):
        torch.mm(a, w, out=y)
        y.add_(1.0)


for _ in range(3):
    step(4)
torch.cuda.synchronize()
touch(os.path.join(D, "warm." + args.role))
res = {"role": args.role, "pid": os.getpid()}

if args.role == "A":
    if not wait_file(os.path.join(D, "warm.B"), 120):
        sys.exit("B never warmed up")
    step(4)
    torch.cuda.synchronize()
    touch(os.path.join(D, "holding.A"))
    seen = None
    loops = 0
    deadline = now() + 60
    while True:
        step(4)
        torch.cuda.synchronize()
        loops += 1
        t = now()
        if seen is None and os.path.exists(os.path.join(D, "wait.B")):
            seen = t
        if seen is not None and t - seen >= args.margin:
            break
        if t > deadline:
            sys.exit("B never queued")
    torch.cuda.synchronize()
    res["t_last"] = now()
    res["loops"] = loops
    write_json(args.out, res)
    log("A last kernel done", res["t_last"])
    time.sleep(args.idle)  # holding nothing, launching nothing
    log("A exits")
else:
    if not wait_file(os.path.join(D, "holding.A"), 120):
        sys.exit("A never held")
    touch(os.path.join(D, "wait.B"))
    t0 = now()
    step(1)
    torch.cuda.synchronize()
    res["t_first"] = now()
    res["t_queued"] = t0
    step(8)
    torch.cuda.synchronize()
    write_json(args.out, res)
    log("B first progress", res["t_first"], "waited", res["t_first"] - t0)
