"""What one allocation's life costs in driver calls, managed against device
memory, as the pressure benchmark's jobs live it: two 1 GiB allocations,
each filled, then both freed; six rounds of each kind. Managed: allocate,
ask the free memory, prefetch to the GPU on the per-thread stream (what
libnvshare does for a fresh converted allocation); device: allocate.
Prints the milliseconds each call took on the calling thread, and the
synchronize that waits for what the calls queued.

  python3 bench/um_calls.py                              # the driver alone
  LD_PRELOAD=build/libnvshare.so python3 bench/um_calls.py   # its "device"
                                  # rounds are converted allocations then

Measured on an H200 (docs/BENCHMARKS.md, 2026-11-28 15:37): a 1 GiB managed
range is populated at ~5-6 ms (the first prefetch of a round blocks its
caller that long) and freed in ~7-8 ms, device memory allocated in
0.2-1.2 ms and freed in 0.5-0.9 ms.
"""
import ctypes
import time

cu = ctypes.CDLL("libcuda.so.1")


def ck(r, what):
    if r != 0:
        raise SystemExit("%s failed: CUDA error %d" % (what, r))


class Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


def timed(f):
    a = time.perf_counter()
    r = f()
    return r, (time.perf_counter() - a) * 1e3


def main():
    ck(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    cu.cuMemPrefetchAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_size_t, Loc, ctypes.c_uint,
                                         ctypes.c_void_p]
    cu.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
    cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    size = 1 << 30
    per_thread = ctypes.c_void_p(2)  # CU_STREAM_PER_THREAD
    for kind in ("managed", "device"):
        for rnd in range(6):
            row, ptrs = [], []
            for _ in range(2):
                p = ctypes.c_uint64()
                if kind == "managed":
                    r, ms = timed(lambda: cu.cuMemAllocManaged(ctypes.byref(p), ctypes.c_size_t(size), 1))
                    ck(r, "cuMemAllocManaged")
                    row.append("alloc %.2f" % ms)
                    fr, tot = ctypes.c_size_t(), ctypes.c_size_t()
                    _, ms = timed(lambda: cu.cuMemGetInfo_v2(ctypes.byref(fr), ctypes.byref(tot)))
                    row.append("info %.2f" % ms)
                    r, ms = timed(lambda: cu.cuMemPrefetchAsync_v2(p.value, size, Loc(1, 0), 0, per_thread))
                    ck(r, "cuMemPrefetchAsync_v2")
                    row.append("pf %.2f" % ms)
                else:
                    r, ms = timed(lambda: cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size)))
                    ck(r, "cuMemAlloc_v2")
                    row.append("alloc %.2f" % ms)
                _, ms = timed(lambda: cu.cuMemsetD8Async(p.value, 1, size, None))
                row.append("memset %.2f" % ms)
                ptrs.append(p.value)
            _, ms = timed(cu.cuCtxSynchronize)
            row.append("sync %.2f" % ms)
            for q in ptrs:
                _, ms = timed(lambda: cu.cuMemFree_v2(q))
                row.append("free %.2f" % ms)
            print(kind, rnd, " ".join(row), flush=True)
            time.sleep(0.2)


if __name__ == "__main__":
    main()
