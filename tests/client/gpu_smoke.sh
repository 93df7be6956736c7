#!/usr/bin/env bash
# Manual smoke test on a real GPU (not run by tests/run): the lookup probe and
# the real libcudart against the real driver, and PyTorch under the preload
# with a 4 GiB limit. Total GPU memory used stays far below the GPU's.
#   tests/client/gpu_smoke.sh        (after: make build/libnvshare.so ...)
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${NVS_BUILD:-build}
NVSHARE_SOCK_DIR=$(mktemp -d) # no scheduler: runs ungated
export NVSHARE_SOCK_DIR
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== probe_lookup (real driver)"
NVS_FOREIGN_LIB=$B/tests/client/libforeign.so LD_PRELOAD=$B/libnvshare.so \
  "$B/tests/client/probe_lookup" 2>&1 | grep -vE '^ok' | head -40
echo "== probe_cudart (real libcudart, real driver)"
LD_PRELOAD=$B/libnvshare.so "$B/tests/client/probe_cudart" 2>&1 | head -20
echo "== PyTorch, NVSHARE_GPU_MEMORY_LIMIT=4Gi"
NVSHARE_GPU_MEMORY_LIMIT=4Gi LD_PRELOAD=$B/libnvshare.so python3 - <<'PY' 2>&1 | tail -20
import ctypes, torch
x = torch.randn(2048, 2048, device="cuda")
y = (x @ x).sum().item()
free, total = torch.cuda.mem_get_info()
print("mem_get_info total", total, "free", free, "matmul ok", y == y)
cuda = ctypes.CDLL("libcuda.so.1")
m = ctypes.c_uint(0)
r = cuda.cuPointerGetAttribute(ctypes.byref(m), 8, ctypes.c_ulonglong(x.data_ptr()))
print("tensor memory is managed:", r == 0 and m.value == 1)
try:
    z = torch.empty(5 << 30, dtype=torch.uint8, device="cuda")
    print("5 GiB allocation under a 4 GiB limit: NOT refused")
except torch.OutOfMemoryError:
    print("5 GiB allocation under a 4 GiB limit: refused (OutOfMemoryError), process carries on")
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    a = x * 2
    with torch.cuda.graph(g):
        b = x * 3
g.replay(); torch.cuda.synchronize()
print("graph capture/replay ok", torch.equal(b, x * 3))
PY
