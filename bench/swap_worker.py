"""One process of the `swapspeed` and `vmmtrain` scenarios (bench/lib/swapbench.py).

    swap_worker.py hold MIB        a MIB tensor (a pattern in it), small matmuls until told
    swap_worker.py pinned MIB      native: cudaMemcpy device <-> pinned host, MIB each way
    swap_worker.py train STEPS     a deterministic training (run with
                                   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)

Each prints "READY {json}" once set up, reads "GO SECONDS" (hold: run that
long, print "HELD {json}" and wait for a line before checking; the others
ignore it), prints "RESULT {json}" and stays until its
stdin closes (the scheduler's view of it is read meanwhile). hold checks its
pattern at the end (ok: every byte still there); train reports its final
loss and a checksum of its parameters as exact hex strings (native and
nvshare must give the same) and its time.
"""
import json
import os
import sys
import time

role, arg = sys.argv[1], int(sys.argv[2])
import torch  # noqa: E402

dev = "cuda"


def out(tag, d):
    sys.stdout.write("%s %s\n" % (tag, json.dumps(d)))
    sys.stdout.flush()
    if tag == "RESULT":
        sys.stdin.read()  # stay (memory held, client connected) until told: the status is read first


def go():
    line = sys.stdin.readline()
    return float(line.split()[1]) if line.startswith("GO") else 0.0


CHUNK = 1 << 27  # int64 words per chunk (1 GiB)


def pattern(n_words, base):
    return torch.arange(base, base + n_words, device=dev, dtype=torch.int64) * 2654435761 + 12345


if role == "hold":
    words = (arg << 20) // 8
    x = torch.empty(words, device=dev, dtype=torch.int64)
    for b in range(0, words, CHUNK):
        n = min(CHUNK, words - b)
        x[b:b + n].copy_(pattern(n, b))
    a = torch.randn(1024, 1024, device=dev)
    c = torch.empty_like(a)
    torch.cuda.synchronize()
    out("READY", {"torch": torch.__version__, "pid": os.getpid()})
    secs = go()
    t0, steps = time.monotonic(), 0
    while time.monotonic() - t0 < secs:
        for _ in range(8):
            torch.matmul(a, a, out=c)
        torch.cuda.synchronize()
        steps += 1
    # The hand-offs of the hold are over: the harness reads the swap counters
    # now, before the check's temporaries (new memory the staging has not
    # grown to yet) make a swap-out that is not the hold's steady state.
    out("HELD", {"steps": steps})
    sys.stdin.readline()
    ok = True
    for b in range(0, words, CHUNK):
        n = min(CHUNK, words - b)
        ok = ok and bool(torch.equal(x[b:b + n], pattern(n, b)))
    out("RESULT", {"ok": ok, "steps": steps, "elapsed": time.monotonic() - t0})
elif role == "pinned":
    n = arg << 20
    d = torch.empty(n, device=dev, dtype=torch.uint8)
    d.fill_(7)
    h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    torch.cuda.synchronize()
    out("READY", {"torch": torch.__version__})
    go()
    r = {"d2h": [], "h2d": []}
    for _ in range(3):
        t = time.monotonic()
        h.copy_(d, non_blocking=True)
        torch.cuda.synchronize()
        r["d2h"].append(n / (time.monotonic() - t) / 1e9)
        t = time.monotonic()
        d.copy_(h, non_blocking=True)
        torch.cuda.synchronize()
        r["h2d"].append(n / (time.monotonic() - t) / 1e9)
    out("RESULT", {"d2h_gbps": sorted(r["d2h"])[1], "h2d_gbps": sorted(r["h2d"])[1]})
elif role == "train":
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(1234)
    H, L, B = 4096, 8, 2048
    model = torch.nn.Sequential(*[m for _ in range(L) for m in (torch.nn.Linear(H, H), torch.nn.GELU())]).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    g = torch.Generator(device=dev)
    g.manual_seed(42)
    xs = torch.randn(4, B, H, device=dev, generator=g)
    ys = torch.randn(4, B, H, device=dev, generator=g)

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(xs[i % 4]), ys[i % 4])
        loss.backward()
        opt.step()
        return loss

    step(0)  # allocator and GEMM set-up; part of the result (both sides do it)
    torch.cuda.synchronize()
    out("READY", {"torch": torch.__version__, "pid": os.getpid(), "reserved_mib": torch.cuda.memory_reserved() >> 20,
                  "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")})
    go()
    t0 = time.monotonic()
    for i in range(1, arg + 1):
        loss = step(i)
    torch.cuda.synchronize()
    el = time.monotonic() - t0
    with torch.no_grad():
        ck = sum(p.double().sum().item() for p in model.parameters())
    out("RESULT", {"elapsed": el, "loss": float(loss).hex(), "checksum": float(ck).hex(),
                   "reserved_mib": torch.cuda.memory_reserved() >> 20})
else:
    sys.exit("unknown role %s" % role)
