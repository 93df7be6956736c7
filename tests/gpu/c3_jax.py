"""Case 3b: a basic JAX program (jit matmul) on the GPU vs NumPy.

The runner sets XLA_PYTHON_CLIENT_PREALLOCATE=false and
XLA_PYTHON_CLIENT_MEM_FRACTION=0.1.
"""
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
    import jax
    import jax.numpy as jnp
except Exception as e:
    prereq_missing("jax: %s" % e)
try:
    gpus = jax.devices("gpu")
except Exception as e:
    prereq_missing("jax has no GPU backend: %s" % e)
if not gpus:
    prereq_missing("jax lists no GPU")


@jax.jit
def f(a, b):
    return jnp.tanh(a @ b).sum(axis=0)


rng = np.random.default_rng(5)
a = rng.standard_normal((1024, 1024)).astype(np.float32)
b = rng.standard_normal((1024, 1024)).astype(np.float32) / 32.0
da = jax.device_put(a, gpus[0])
db = jax.device_put(b, gpus[0])
out = np.asarray(f(da, db).block_until_ready())
ref = np.tanh(a.astype(np.float64) @ b.astype(np.float64)).sum(axis=0)
# JAX's default matmul precision on GPUs may use TF32: compare loosely.
err = float(np.max(np.abs(out - ref)) / max(1.0, float(np.max(np.abs(ref)))))
res = {"ok": err < 2e-2, "rel_err": err, "device": str(gpus[0]), "jax": jax.__version__}
log(res)
write_json(args.out, res)
