"""Case 1: deterministic PyTorch training loop (cuDNN conv net, AdamW).

Writes the per-step losses (as exact float reprs) and a parameter checksum to
--out. The runner runs it natively and under the preload and compares.
Needs CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment (set by the runner).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, now, prereq_missing, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--batch", type=int, default=64)
args = ap.parse_args()

try:
    import torch
    import torch.nn as nn
except ImportError as e:
    prereq_missing("torch: %s" % e)
if not torch.cuda.is_available():
    print("torch.cuda.is_available() is False", flush=True)
    sys.exit(1)

torch.manual_seed(1234)
torch.cuda.manual_seed_all(1234)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.use_deterministic_algorithms(True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = self.features(x)
        # Global mean instead of AdaptiveAvgPool2d: its CUDA backward has no
        # deterministic implementation.
        x = x.mean(dim=(2, 3))
        return self.head(x)


dev = torch.device("cuda")
g = torch.Generator().manual_seed(99)
nbatches = 4
xs = [torch.randn(args.batch, 3, 32, 32, generator=g).to(dev) for _ in range(nbatches)]
ys = [torch.randint(0, 10, (args.batch,), generator=g) for _ in range(nbatches)]
# Cross-entropy through a precomputed one-hot target: log_softmax, a product
# and a mean have deterministic CUDA backward passes; NLLLoss is not on every
# version's deterministic list.
onehots = [torch.nn.functional.one_hot(y, 10).float().to(dev) for y in ys]

model = Net().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)


def lossf(logits, onehot):
    return -(torch.log_softmax(logits, dim=1) * onehot).sum(dim=1).mean()


losses = []
t0 = now()
for step in range(args.steps):
    i = step % nbatches
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(xs[i]), onehots[i])
    loss.backward()
    opt.step()
    losses.append(loss.item())
torch.cuda.synchronize()
elapsed = now() - t0
with torch.no_grad():
    checksum = float(sum(p.double().sum().item() for p in model.parameters()))
log("steps", args.steps, "first", losses[0], "last", losses[-1], "elapsed", elapsed)
write_json(args.out, {
    "losses": [repr(v) for v in losses],
    "checksum": repr(checksum),
    "elapsed_s": elapsed,
    "torch": torch.__version__,
    "cudnn": torch.backends.cudnn.version(),
    "preload": os.environ.get("LD_PRELOAD", ""),
})
