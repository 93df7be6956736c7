"""What the machine offers, read once before anything starts: the GPU's
name, driver, CUDA version and free memory (nvidia-smi), and the variable
that turns nvshare's hand-off swapping off (BENCH_SWAP_OFF_ENV, or a name
found in the binaries)."""
import re
import subprocess
import sys

import config
from config import LIB, SCHED_BIN, SWAP_NAME_RE, SWAP_OFF_ENV, env


def query_gpu(dry):
    if dry or config.FAKE:
        return {"name": "(dry run)", "driver": "?", "cuda": "?", "free_mib": 81000, "total_mib": 81559}
    idx = env("NVS_GPU_INDEX", "0")
    q = subprocess.run(["timeout", "30", "nvidia-smi", "-i", idx,
                        "--query-gpu=name,driver_version,memory.free,memory.total",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True)
    if q.returncode != 0 or not q.stdout.strip():
        sys.exit("nvidia-smi failed: %s %s" % (q.stdout, q.stderr))
    name, drv, free, total = [x.strip() for x in q.stdout.strip().splitlines()[0].split(",")]
    full = subprocess.run(["timeout", "30", "nvidia-smi"], capture_output=True, text=True).stdout
    m = re.search(r"CUDA Version:\s*([0-9.]+)", full)
    return {"name": name, "driver": drv, "cuda": m.group(1) if m else "?",
            "free_mib": int(float(free)), "total_mib": int(float(total))}


def detect_swap_env():
    if SWAP_OFF_ENV is not None:
        return dict([SWAP_OFF_ENV.split("=", 1)]) if "=" in SWAP_OFF_ENV else {}
    names = set()
    for f in (LIB, SCHED_BIN):
        try:
            with open(f, "rb") as fh:
                names.update(m.decode() for m in re.findall(SWAP_NAME_RE, fh.read()))
        except OSError:
            pass
    names = sorted(n for n in names if n != "NVSHARE_CLIENT_SCHED_SWAP_H")
    if "NVSHARE_SWAP" in names:  # docs/swap.md: prefetch on grant off
        return {"NVSHARE_SWAP": "0"}
    return {names[0]: "0"} if names else {}
