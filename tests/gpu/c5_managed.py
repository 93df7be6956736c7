"""Case 5: the memory type of a torch.empty() pointer.

Asks the CUDA runtime PyTorch loaded (cudaPointerGetAttributes, through
ctypes) and, as a second opinion, the driver (cuPointerGetAttribute
CU_POINTER_ATTRIBUTE_IS_MANAGED). Under the preload the type must be managed
(3), natively device (2). Falls back to CuPy if no libcudart is mapped.
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import log, prereq_missing, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    prereq_missing("torch: %s" % e)

TYPES = {0: "unregistered", 1: "host", 2: "device", 3: "managed"}
t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
ptr = t.data_ptr()
res = {"ptr": hex(ptr)}


def mapped(libname):
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if os.path.basename(p).startswith(libname):
                return p
    return None


cudart = mapped("libcudart.so")
res["libcudart"] = cudart
rtype = None
if cudart:
    lib = ctypes.CDLL(cudart)
    buf = (ctypes.c_byte * 256)()  # cudaPointerAttributes, with room to spare
    rc = lib.cudaPointerGetAttributes(ctypes.byref(buf), ctypes.c_void_p(ptr))
    res["runtime_rc"] = rc
    if rc == 0:
        rtype = ctypes.c_int.from_buffer(buf, 0).value
else:
    try:
        import cupy
        a = cupy.cuda.runtime.pointerGetAttributes(ptr)
        rtype = int(a.type)
        res["via"] = "cupy"
    except Exception as e:
        res["cupy_err"] = str(e)[:200]
res["runtime_type"] = rtype
res["runtime_type_name"] = TYPES.get(rtype, str(rtype))

try:
    cu = ctypes.CDLL("libcuda.so.1")
    v = ctypes.c_int(-1)
    rc = cu.cuPointerGetAttribute(ctypes.byref(v), ctypes.c_int(8), ctypes.c_uint64(ptr))
    res["driver_is_managed"] = v.value if rc == 0 else None
    res["driver_rc"] = rc
except Exception as e:
    res["driver_err"] = str(e)[:200]
if rtype is None:
    print("cannot query the pointer type", flush=True)
    log(res)
    write_json(args.out, res)
    sys.exit(1)
log(res)
write_json(args.out, res)
