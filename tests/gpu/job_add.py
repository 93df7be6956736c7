"""A batch job for cases 6 and 8: repeated in-place adds over one tensor.

Allocates --mib MiB of float32, adds 1.0 to every element --iters times and
checks that every element equals --iters at the end (exact in float32 up to
2**24). Records when the compute phase started and ended (CLOCK_MONOTONIC) and
the completion time of every --sync-every iterations.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, now, prereq_missing, touch, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--mib", type=int, default=1536)
ap.add_argument("--iters", type=int, default=1500)
ap.add_argument("--sync-every", type=int, default=50)
ap.add_argument("--started-file", default="")
ap.add_argument("--ready-file", default="", help="written once the memory is allocated")
ap.add_argument("--go-file", default="", help="wait for this file before computing")
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    prereq_missing("torch: %s" % e)

from gpucommon import wait_file  # noqa: E402

dev = torch.device("cuda")
torch.cuda.init()
n = args.mib * (1 << 20) // 4
x = torch.zeros(n, dtype=torch.float32, device=dev)
torch.cuda.synchronize()
if args.ready_file:
    touch(args.ready_file)
if args.go_file and not wait_file(args.go_file, 120):
    print("go file never appeared", flush=True)
    sys.exit(1)
t_start = now()
marks = []
for i in range(args.iters):
    x.add_(1.0)
    if (i + 1) % args.sync_every == 0:
        torch.cuda.synchronize()
        marks.append(now())
        if len(marks) == 1 and args.started_file:
            touch(args.started_file)
torch.cuda.synchronize()
t_end = now()
lo, hi = x.min().item(), x.max().item()
ok = lo == hi == float(args.iters)
res = {"ok": ok, "min": lo, "max": hi, "iters": args.iters, "mib": args.mib,
       "start": t_start, "end": t_end, "elapsed_s": t_end - t_start, "marks": marks,
       "pid": os.getpid()}
log({k: v for k, v in res.items() if k != "marks"})
write_json(args.out, res)
sys.exit(0 if ok else 1)
