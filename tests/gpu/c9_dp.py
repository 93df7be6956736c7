"""Case 9f: nvshare-device-plugin on the real GPUs, against the fake kubelet.

  c9_dp.py --plugin BIN --plugin-libs DIR --lib-dir DIR --dir TMP --uuids U0,U1,... \
           --mem-mib M0,M1,... --replicas K --out F

Starts the plugin with the machine's own NVML (no NVIDIA_VISIBLE_DEVICES),
lets it register with tests/k8s/fake_kubelet.py and checks: both resources
registered; nvshare.com/gpu lists <UUID>__1..K of every GPU nvidia-smi
lists, all Healthy; nvshare.com/gpu-memory lists one unit per GiB of each
GPU (--memory-unit 1Gi); a preferred allocation of 2 spreads over two GPUs;
Allocate of a replica of each GPU sets NVIDIA_VISIBLE_DEVICES to that GPU's
UUID (and both, for one replica of each). Writes {"checks": [[ok, what]],
"visible": {uuid: NVIDIA_VISIBLE_DEVICES}} to --out; the runner then runs a
job with CUDA_VISIBLE_DEVICES set to what Allocate gave for the last GPU.
Exit 77 when grpc or the protobuf module is missing.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "k8s"))
from gpucommon import checker, prereq_missing, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--plugin", required=True)
ap.add_argument("--lib-dir", required=True, help="holds libnvshare.so (--host-lib-dir)")
ap.add_argument("--plugin-libs", default="", help="LD_LIBRARY_PATH for the plugin only")
ap.add_argument("--dir", required=True, help="private directory: kubelet dir, logs")
ap.add_argument("--pb-dir", default="", help="deviceplugin_pb2.py compiled beforehand")
ap.add_argument("--uuids", required=True)
ap.add_argument("--mem-mib", required=True)
ap.add_argument("--replicas", type=int, default=4)
ap.add_argument("--out", required=True)
args = ap.parse_args()

try:
    import grpc  # noqa: F401
    from fake_kubelet import GPU, MEM, FakeKubelet, load_messages
    pb = load_messages(os.path.join(ROOT, "device-plugin"), args.pb_dir or os.path.join(args.dir, "py"))
except Exception as e:  # noqa: BLE001 (grpcio, protobuf or protoc missing)
    prereq_missing("fake kubelet: %s: %s" % (type(e).__name__, e))

uuids = args.uuids.split(",")
mem_mib = [int(x) for x in args.mem_mib.split(",")]
checks, check = checker()

kdir = os.path.join(args.dir, "kubelet")
os.makedirs(kdir, exist_ok=True)
env = dict(os.environ)
env.pop("NVIDIA_VISIBLE_DEVICES", None)
if args.plugin_libs:
    env["LD_LIBRARY_PATH"] = args.plugin_libs + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
log = open(os.path.join(args.dir, "plugin.log"), "w")
# Private socket directory, PodResources socket and state directory:
# Allocate makes <sock-dir>/pods/<key> (Pod sockets) and its record's copy,
# never in the machine's /var/run/nvshare or /var/lib/nvshare.
plugin = subprocess.Popen([args.plugin, "--kubelet-dir", kdir, "--replicas", str(args.replicas),
                           "--host-lib-dir", args.lib_dir, "--memory-unit", "1Gi",
                           "--host-socket-dir", os.path.join(args.dir, "sock"),
                           "--container-socket-dir", "/var/run/nvshare",
                           "--pod-resources-socket",
                           os.path.join(args.dir, "pod-resources", "kubelet.sock"),
                           "--state-dir", os.path.join(args.dir, "state")],
                          env=env, stdout=log, stderr=subprocess.STDOUT)
kl = FakeKubelet(kdir, pb)
visible = {}
try:
    kl.start()
    reg = kl.wait(lambda: kl.regs(GPU) and kl.regs(MEM), 15)
    check(reg, "registers nvshare.com/gpu and nvshare.com/gpu-memory")
    got = reg and kl.wait(lambda: kl.last_list(GPU) and kl.last_list(MEM), 10)
    lst = kl.last_list(GPU) or []
    want = sorted("%s__%d" % (u, k) for u in uuids for k in range(1, args.replicas + 1))
    check(got and sorted(i for i, _ in lst) == want and all(h == "Healthy" for _, h in lst),
          "nvshare.com/gpu: %d x %d replicas <UUID>__k of the GPUs nvidia-smi lists, all Healthy "
          "(%d listed)" % (len(uuids), args.replicas, len(lst)))
    mem = kl.last_list(MEM) or []
    per = {u: sum(1 for i, _ in mem if i.split("__")[0] == u) for u in uuids}
    # NVML's total is a little above nvidia-smi's MiB figure rounded down.
    units_ok = all(per[u] in (m // 1024, m // 1024 + 1) for u, m in zip(uuids, mem_mib))
    check(got and units_ok and len(mem) == sum(per.values()),
          "nvshare.com/gpu-memory: one unit per GiB of each GPU (%s)" % ", ".join(
              "%s…: %d" % (u[:12], per[u]) for u in uuids))
    if reg and len(uuids) >= 2:
        pref = kl.preferred(want, [], 2)
        check(len({p.split("__")[0] for p in pref}) == 2,
              "GetPreferredAllocation of 2 spreads over two GPUs (%s)" % ",".join(pref))
    if reg:
        for u in uuids:
            e = dict(kl.allocate(["%s__1" % u]).envs)
            visible[u] = e.get("NVIDIA_VISIBLE_DEVICES", "")
            check(visible[u] == u and e.get("LD_PRELOAD", "").endswith("/libnvshare.so"),
                  "Allocate %s__1: NVIDIA_VISIBLE_DEVICES=%s, LD_PRELOAD set" % (u[:12] + "…", visible[u]))
        if len(uuids) >= 2:
            e = dict(kl.allocate(["%s__2" % uuids[1], "%s__2" % uuids[0]]).envs)
            check(e.get("NVIDIA_VISIBLE_DEVICES") == "%s,%s" % (uuids[1], uuids[0]),
                  "Allocate one replica of each GPU: both UUIDs in order (%s)" % e.get("NVIDIA_VISIBLE_DEVICES"))
finally:
    kl.stop()
    plugin.terminate()
    try:
        rc = plugin.wait(timeout=10)
    except subprocess.TimeoutExpired:
        plugin.kill()
        rc = plugin.wait()
check(rc == 0, "plugin exits 0 on SIGTERM (exit %s)" % rc)
write_json(args.out, {"checks": checks, "visible": visible})
print(json.dumps({"checks": len(checks), "failed": sum(1 for c in checks if not c[0])}))
sys.exit(0)
