"""Case 4: NVSHARE_GPU_MEMORY_LIMIT seen by PyTorch.

mem_get_info() total equals the limit; an allocation over the limit raises
torch.OutOfMemoryError; afterwards the process still allocates and computes.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, prereq_missing, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--limit-mib", type=int, default=2048)
ap.add_argument("--over-mib", type=int, default=3072)
ap.add_argument("--after-mib", type=int, default=512)
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    prereq_missing("torch: %s" % e)

MiB = 1 << 20
dev = torch.device("cuda")
free, total = torch.cuda.mem_get_info()
res = {"free": free, "total": total, "limit": args.limit_mib * MiB}
oom_type = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
try:
    x = torch.empty(args.over_mib * MiB, dtype=torch.uint8, device=dev)
    x.fill_(1)
    torch.cuda.synchronize()
    res["over_alloc"] = "succeeded"
    del x
except oom_type as e:
    res["over_alloc"] = "OutOfMemoryError"
    res["oom_msg"] = str(e).splitlines()[0][:200]
except Exception as e:  # any other error is a failure
    res["over_alloc"] = "%s: %s" % (type(e).__name__, str(e)[:200])
torch.cuda.empty_cache()
try:
    y = torch.empty(args.after_mib * MiB // 4, dtype=torch.float32, device=dev)
    y.fill_(0.5)
    s = y.sum().item()
    res["after_ok"] = s == 0.5 * y.numel()
    res["after_sum"] = s
except Exception as e:
    res["after_ok"] = False
    res["after_err"] = "%s: %s" % (type(e).__name__, str(e)[:200])
res["ok"] = (total == args.limit_mib * MiB and res["over_alloc"] == "OutOfMemoryError"
             and res["after_ok"])
log(res)
write_json(args.out, res)
