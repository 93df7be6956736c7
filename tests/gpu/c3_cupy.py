"""Case 3a: a basic CuPy program (elementwise, matmul, reduction) vs NumPy."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, prereq_missing, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
args = ap.parse_args()

try:
    import numpy as np
    import cupy as cp
except Exception as e:  # ImportError, or a CUDA library missing
    prereq_missing("cupy: %s" % e)
try:
    ndev = cp.cuda.runtime.getDeviceCount()
except Exception as e:
    print("cupy getDeviceCount failed: %s" % e, flush=True)
    ndev = 0
if ndev < 1:
    prereq_missing("cupy sees no GPU")

rng = np.random.default_rng(3)
a = rng.standard_normal((512, 512)).astype(np.float32)
b = rng.standard_normal((512, 512)).astype(np.float32)
da, db = cp.asarray(a), cp.asarray(b)
e = cp.sin(da) * 2.0 + cp.exp(-cp.abs(db))
mm = da @ db
red = cp.sum(e, axis=0)
tot = float(cp.sum(mm * mm))
v = cp.arange(1_000_000, dtype=cp.int64)
s = int(cp.sum(v))
cp.cuda.Device().synchronize()

ne = np.sin(a) * 2.0 + np.exp(-np.abs(b))
nmm = a @ b
errs = {
    "elementwise": float(np.max(np.abs(cp.asnumpy(e) - ne))),
    "matmul_rel": float(np.max(np.abs(cp.asnumpy(mm) - nmm)) / np.max(np.abs(nmm))),
    "reduction": float(np.max(np.abs(cp.asnumpy(red) - ne.sum(axis=0)))),
    "sumsq_rel": abs(tot - float(np.sum(nmm.astype(np.float64) ** 2))) / float(np.sum(nmm.astype(np.float64) ** 2)),
}
ok = (errs["elementwise"] < 1e-4 and errs["matmul_rel"] < 1e-3 and errs["reduction"] < 1e-2
      and errs["sumsq_rel"] < 1e-3 and s == 999999 * 1000000 // 2)
res = {"ok": ok, "errors": errs, "int_sum": s, "cupy": cp.__version__}
log(res)
write_json(args.out, res)
