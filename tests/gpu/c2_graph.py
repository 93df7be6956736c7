"""Case 2: CUDA graph capture and replay gives the same result as eager."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, prereq_missing, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--replays", type=int, default=20)
args = ap.parse_args()

try:
    import torch
    import torch.nn as nn
except ImportError as e:
    prereq_missing("torch: %s" % e)

torch.manual_seed(7)
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.Tanh()).to(dev)
model.eval()


def fn(x):
    y = model(x)
    return y * 2.0 + y.sum(dim=1, keepdim=True) / 512.0


res = {"ok": False}
with torch.no_grad():
    static_in = torch.randn(64, 512, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(static_in)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(static_in)
    torch.cuda.synchronize()
    g = torch.Generator(device=dev).manual_seed(11)
    max_abs = 0.0
    bitwise = True
    for i in range(args.replays):
        x = torch.randn(64, 512, device=dev, generator=g)
        static_in.copy_(x)
        graph.replay()
        eager = fn(x)
        torch.cuda.synchronize()
        d = (static_out - eager).abs().max().item()
        max_abs = max(max_abs, d)
        bitwise = bitwise and bool(torch.equal(static_out, eager))
    close = max_abs <= 1e-5
    res = {"ok": close, "bitwise": bitwise, "max_abs_diff": max_abs, "replays": args.replays}
log(res)
write_json(args.out, res)
