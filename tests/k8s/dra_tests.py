"""Scenarios of t_dra.sh: the real nvshare-dra-plugin against the fake
kubelet (fake_kubelet.py FakeDRAKubelet: plugin watcher, DRA manager,
health stream) and the fake API server (claims in, ResourceSlices out),
beside a real nvshare-scheduler and real clients (sim_app under
libnvshare.so) on the simulated GPU with three GPUs. Prints TAP.

t_dra.sh starts the API server and the scheduler and sets: B, T, NVS_ROOT,
NVSHARE_SOCK_DIR, API_URL, API_CTL (the fake's control FIFO), API_OUT (its
log), SLICES (its slices file), PROC (the scheduler's fake /proc), CTL
(nvsharectl as a host process), PRELOAD, NODE, the pod UIDs UA, UB, UC.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dptap import done, guard, ok, skip, wait_until  # noqa: E402
from fake_kubelet import (HEALTH_ALPHA, FakeDRAKubelet, RegistrationRefused,  # noqa: E402
                          load_dra_messages)

ROOT = os.environ["NVS_ROOT"]
B = os.environ["B"]
T = os.environ["T"]
SOCK = os.environ["NVSHARE_SOCK_DIR"]
API_URL = os.environ["API_URL"]
API_CTL = os.environ["API_CTL"]
API_OUT = os.environ["API_OUT"]
SLICES = os.environ["SLICES"]
PROC = os.environ["PROC"]
CTL = os.environ["CTL"]
PRELOAD = os.environ["PRELOAD"]
NODE = os.environ["NODE"]
UA, UB, UC, UD = os.environ["UA"], os.environ["UB"], os.environ["UC"], os.environ["UD"]
PLUGIN = os.path.join(B, "nvshare-dra-plugin")
APP = os.path.join(B, "tests", "e2e", "sim_app")
FAKE_NVML_DIR = os.path.join(B, "tests", "k8s", "fakenvml")
DRIVER = "gpu.nvshare.com"
GiB = 1 << 30
MiB = 1 << 20



pb = load_dra_messages(os.path.join(ROOT, "dra-plugin"), os.path.join(T, "py"))
procs = []


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ---- the fake API server ----

api = open(API_CTL, "w")


def api_cmd(c):
    """Sends a control command and waits until the fake has applied it."""
    before = read(API_OUT).count(" CTL %s " % c["op"]) + read(API_OUT).count(" CTL %s\n" % c["op"])
    api.write(json.dumps(c) + "\n")
    api.flush()
    wait_until(lambda: read(API_OUT).count(" CTL %s " % c["op"])
               + read(API_OUT).count(" CTL %s\n" % c["op"]) > before, 5)


def claim_gets(ns, name):
    return len(re.findall(r"REQ CLAIM GET \d+ %s/%s\b" % (ns, name), read(API_OUT)))


def claim(ns, name, uid, results, pods, owner=True, allocated=True):
    """A ResourceClaim as the API server returns it. results: dicts with
    request, device and optional memory, cores (quantities), share, pool,
    driver. pods: [(name, uid)] of status.reservedFor; owner: the first Pod
    is the claim's controller (a claim made from a ResourceClaimTemplate)."""
    meta = {"name": name, "namespace": ns, "uid": uid, "resourceVersion": "1"}
    if owner and pods:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pods[0][0],
                                    "uid": pods[0][1], "controller": True,
                                    "blockOwnerDeletion": True}]
    reqs, res = [], []
    for r in results:
        caps = {k: r[k] for k in ("memory", "cores") if k in r}
        reqs.append({"name": r["request"], "exactly": {
            "deviceClassName": DRIVER, "capacity": {"requests": caps}}})
        x = {"request": r["request"], "driver": r.get("driver", DRIVER),
             "pool": r.get("pool", NODE), "device": r["device"]}
        if "share" in r:
            x["shareID"] = r["share"]
        if caps or "consumed" in r:
            x["consumedCapacity"] = r.get("consumed", caps)
        res.append(x)
    status = {"reservedFor": [{"resource": "pods", "name": p, "uid": u} for p, u in pods]}
    if allocated:
        status["allocation"] = {"devices": {"results": res}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": reqs}}, "status": status}


def put_claim(c):
    api_cmd({"op": "claim", "claim": c})


def slice_of(node=None):
    s = read_json(SLICES) or {}
    return s.get("%s-%s" % (node or NODE, DRIVER))


# ---- the plugin ----

devroot = os.path.join(T, "devroot")
os.makedirs(os.path.join(devroot, "dev"))
for name in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] + ["nvidia%d" % i for i in range(4)]:
    open(os.path.join(devroot, "dev", name), "w").close()


def plugin_args(tag, node=NODE, extra=()):
    base = os.path.join(T, tag)
    return [PLUGIN, "--node-name", node, "--registry-dir", os.path.join(base, "registry"),
            "--plugin-dir", os.path.join(base, "plugin"), "--kube-api", API_URL,
            "--kube-token-file", os.path.join(T, "token"), "--kube-ca-file",
            os.path.join(T, "ca.crt"), "--host-socket-dir", SOCK,
            "--container-socket-dir", "/var/run/nvshare", "--host-lib-dir", B,
            "--cdi-spec-dir", os.path.join(base, "cdi"), "--cdi-dev-root", devroot,
            "--health-file", os.path.join(base, "health"), "--scheduler-wait", "20s"] + list(extra)


def start_plugin(tag, node=NODE, extra=(), env_extra=None):
    env = dict(os.environ)
    env.pop("NODE_NAME", None)
    env.update(env_extra or {})
    log = open(os.path.join(T, tag + ".log"), "a")
    p = subprocess.Popen(plugin_args(tag, node, extra), env=env, stdout=log,
                         stderr=subprocess.STDOUT)
    p.logpath = log.name
    p.tag = tag
    procs.append(p)
    return p


def log_of(p):
    return read(p.logpath)


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(guard(60))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def probe(tag, kind):
    r = subprocess.run([PLUGIN, "--health-file", os.path.join(T, tag, "health"), "--probe", kind],
                       capture_output=True, text=True)
    return r.returncode, r.stdout.strip()


def kubelet(tag, prefer="v1"):
    return FakeDRAKubelet(os.path.join(T, tag, "registry"), pb, prefer)


# ---- clients ----

def start_app(name, cdi_spec, uuid, cgroup=None):
    """A container's process as its claim's CDI spec makes it: the socket
    directory the spec mounts (its host path), LD_PRELOAD of the library
    (our build's), and only its GPU visible. cgroup: a fake Pod cgroup for
    the scheduler's /proc (written for its own pid before it connects)."""
    edits = cdi_spec["containerEdits"]
    sock_dir = [m["hostPath"] for m in edits["mounts"] if m["containerPath"] == "/var/run/nvshare"][0]
    env = dict(os.environ)
    env.update({"NVSHARE_SOCK_DIR": sock_dir, "LD_PRELOAD": PRELOAD,
                "CUDA_VISIBLE_DEVICES": uuid})
    cmd = [APP, "--name", name, "--alloc", "64Mi", "--kernels", "20", "--kernel-us", "1000",
           "--idle-after", "20", "--hold"]
    if cgroup:
        cmd = ["sh", "-c", 'd=$1/$$; mkdir -p "$d"; printf "%s\\n" "$2" >"$d/cgroup"; shift 2; '
               'exec "$@"', "sh", PROC, cgroup] + cmd
    err = open(os.path.join(T, name + ".err"), "w")
    p = subprocess.Popen(cmd, env=env, stdout=open(os.path.join(T, name + ".out"), "w"),
                         stderr=err)
    p.errpath = err.name
    procs.append(p)
    return p


def cg_of(uid):
    return ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
            "cri-containerd-3f2e1d0c9b8a79685746352413021f0e3f2e1d0c9b8a79685746352413021f0e.scope"
            % uid.replace("-", "_"))


def ctl(*args):
    r = subprocess.run([CTL] + list(args), capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


def status_client(pid):
    rc, out = ctl("--json")
    if rc:
        return None
    for c in json.loads(out).get("clients", []):
        if c["pid"] == pid:
            return c
    return None


def limits_of(pid):
    c = status_client(pid)
    if not c or not c["gpus"]:
        return None
    lim = c["gpus"][0]["limits"]
    return lim["core_limit"], lim["mem_limit"]


def events():
    return read(os.path.join(T, "events.jsonl"))


# ---- scenarios ----

def scenario_publish():
    """Start, slice, registration, readiness."""
    p = start_plugin("p1")
    got = wait_until(lambda: slice_of() is not None, 10)
    s = slice_of() or {}
    ok(got, "ResourceSlice %s-%s created at start" % (NODE, DRIVER), log_of(p))
    sp = s.get("spec", {})
    devs = sp.get("devices", [])
    ok(sp.get("driver") == DRIVER and sp.get("nodeName") == NODE
       and sp.get("pool", {}).get("name") == NODE and sp.get("pool", {}).get("resourceSliceCount") == 1,
       "slice: driver, nodeName, pool = the node, resourceSliceCount 1", sp)
    ok(len(devs) == 3 and all(d.get("allowMultipleAllocations") is True for d in devs),
       "three simulated GPUs, three devices, each allowMultipleAllocations", devs)
    d0 = devs[0] if devs else {}
    cap = d0.get("capacity", {})
    ok(cap.get("memory", {}).get("value") == "16Gi"
       and cap["memory"].get("requestPolicy") == {"default": "16Gi", "validRange": {
           "min": "1Mi", "max": "16Gi", "step": "1Mi"}},
       "capacity memory: 16Gi (the GPU's), requests in 1 MiB steps, default the whole GPU",
       cap.get("memory"))
    ok(cap.get("cores") == {"value": "100", "requestPolicy": {"default": "100", "validRange": {
        "min": "1", "max": "100", "step": "1"}}},
       "capacity cores: 100 (percent), steps of 1, default 100", cap.get("cores"))
    at = d0.get("attributes", {})
    ok(at.get("uuid", {}).get("string", "").startswith("GPU-5e1f0000")
       and at.get("productName") == {"string": "NVIDIA H200 (simulated)"}
       and at.get("index") == {"int": 0} and at.get("physicalMemory") == {"int": 16 * GiB}
       and at.get("driverVersion") == {"version": "580.0.0"},
       "attributes: uuid, productName, index, physicalMemory, driverVersion (semver)", at)
    ok(d0.get("name") == "gpu-" + at.get("uuid", {}).get("string", "")[4:].lower(),
       "device name: gpu-<UUID without GPU->", d0.get("name"))
    # The kubernetes-models schema of resource.k8s.io/v1 (t_manifests.sh's
    # validator), when its node_modules are installed.
    val = os.path.join(ROOT, "tests", "k8s", "tools")
    if os.path.isdir(os.path.join(val, "node_modules", "kubernetes-models")) and s:
        f = os.path.join(T, "slice-val.json")
        with open(f, "w") as fh:
            json.dump([{"source": "plugin", "object": s}], fh)
        r = subprocess.run(["node", os.path.join(val, "validate.mjs"), f], capture_output=True,
                           text=True)
        ok(r.returncode == 0, "the published slice passes the resource.k8s.io/v1 schema "
           "(kubernetes-models, strict fields)", r.stdout + r.stderr)
    else:
        skip("the published slice passes the resource.k8s.io/v1 schema",
             "tests/k8s/tools/node_modules not installed (t_manifests.sh installs it)")

    rc, out = probe("p1", "ready")
    ok(rc == 1, "probe ready: not before the kubelet registered the driver (%s)" % out)
    kl = kubelet("p1")
    try:
        info = kl.register()
    except (RegistrationRefused, TimeoutError) as e:
        ok(False, "the fake kubelet's plugin watcher registers the driver", "%s\n%s" % (e, log_of(p)))
        return p, None, devs
    ok(info.type == "DRAPlugin" and info.name == DRIVER
       and info.endpoint == os.path.join(T, "p1", "plugin", "dra.sock")
       and list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"],
       "GetInfo: DRAPlugin %s, endpoint <plugin-dir>/dra.sock, v1 and v1beta1" % DRIVER, info)
    ok(os.path.exists(os.path.join(T, "p1", "registry", DRIVER + "-reg.sock")),
       "registration socket <registry-dir>/%s-reg.sock" % DRIVER)
    ok(wait_until(lambda: probe("p1", "ready")[0] == 0, 5)
       and "registered with the kubelet" in log_of(p),
       "NotifyRegistrationStatus: registered (logged; probe ready)", probe("p1", "ready"))
    return p, kl, devs


def scenario_prepare(p, kl, devs):
    """Two claims on one GPU: CDI, bindings, limits through the scheduler."""
    g0, g1 = devs[0]["name"], devs[1]["name"]
    u0 = devs[0]["attributes"]["uuid"]["string"]
    ca = claim("team-a", "trainer-a-gpu", "c1a1a1a1-0000-4000-8000-00000000000a",
               [{"request": "gpu", "device": g0, "memory": "10Gi", "cores": "30",
                 "share": "5a1e0000-0000-4000-8000-00000000000a"}], [("trainer-a", UA)])
    cb = claim("team-b", "trainer-b-gpu", "c1b1b1b1-0000-4000-8000-00000000000b",
               [{"request": "gpu", "device": g0, "memory": "4Gi", "cores": "50",
                 "share": "5a1e0000-0000-4000-8000-00000000000b"}], [("trainer-b", UB)])
    put_claim(ca)
    put_claim(cb)
    ka = ("team-a", ca["metadata"]["uid"], "trainer-a-gpu")
    kb = ("team-b", cb["metadata"]["uid"], "trainer-b-gpu")
    t0 = time.monotonic()
    r = kl.prepare([ka, kb])
    took = time.monotonic() - t0
    da, ea = r.get(ka[1], ([], "missing"))
    db, eb = r.get(kb[1], ([], "missing"))
    ok(not ea and not eb, "NodePrepareResources of two claims on one GPU: both prepared (%.2fs)"
       % took, "%s\n%s\n%s" % (ea, eb, log_of(p)))
    if ea or eb:
        return None
    ok(da == [(["gpu"], NODE, g0, ["nvshare.com/claim=%s-%s" % (ka[1], g0),
                                   "nvidia.com/gpu=" + u0],
               "5a1e0000-0000-4000-8000-00000000000a")],
       "claim A: request, pool, device, CDI IDs (ours, then the driver's) and its shareID", da)
    spec_a = read_json(os.path.join(T, "p1", "cdi", "nvshare.com-claim_%s.json" % ka[1]))
    spec_b = read_json(os.path.join(T, "p1", "cdi", "nvshare.com-claim_%s.json" % kb[1]))
    ok(spec_a and spec_a["kind"] == "nvshare.com/claim" and spec_a["cdiVersion"] == "0.5.0"
       and [d["name"] for d in spec_a["devices"]] == ["%s-%s" % (ka[1], g0)]
       and spec_a["devices"][0]["containerEdits"]["deviceNodes"] == [
           {"path": "/dev/nvidia0", "hostPath": devroot + "/dev/nvidia0"}],
       "CDI spec of claim A: kind nvshare.com/claim, one device with its GPU's node", spec_a)
    edits = (spec_a or {}).get("containerEdits", {})
    mounts = {m["containerPath"]: m for m in edits.get("mounts", [])}
    key_a = mounts.get("/var/run/nvshare", {}).get("hostPath", "").rsplit("/", 1)[-1]
    ok(edits.get("env") == ["LD_PRELOAD=/usr/local/nvshare/lib/libnvshare.so"]
       and mounts.get("/usr/local/nvshare/lib", {}).get("hostPath") == B
       and "ro" in mounts["/usr/local/nvshare/lib"]["options"]
       and re.fullmatch(SOCK + "/pods/[0-9a-f]{16}", mounts.get("/var/run/nvshare", {})
                        .get("hostPath", ""))
       and [x["path"] for x in edits.get("deviceNodes", [])]
       == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"],
       "CDI claim-wide edits: LD_PRELOAD, the library (ro) and the claim's Pod socket "
       "directory at /var/run/nvshare, the control nodes", edits)
    bind_a = read_json(os.path.join(SOCK, "bindings", key_a + ".json"))
    ok(bind_a == {"namespace": "team-a", "name": "trainer-a", "uid": UA, "origin": "dra",
                  "claim": "team-a/trainer-a-gpu", "core_limit": 30, "memory_limit": 10 * GiB},
       "binding of claim A: its Pod (name, uid), the ceiling 30 %, 10Gi", bind_a)
    st = os.stat(os.path.join(SOCK, "bindings", key_a + ".json"))
    ok(st.st_uid == os.geteuid() and (st.st_mode & 0o077) == 0,
       "binding file: the scheduler's user, mode 0600", oct(st.st_mode))
    ok(os.path.exists(os.path.join(SOCK, "pods", key_a, "scheduler.sock")),
       "the scheduler listens on claim A's Pod socket before Prepare answers")
    ok(re.search(r'"event":"pod_socket","key":"%s","namespace":"team-a","pod":"trainer-a",'
                 r'"core_limit":30,"memory_limit":%d' % (key_a, 10 * GiB), events()),
       "scheduler: pod_socket event with the claim's ceiling")

    # Real clients on the simulated GPU, as the containers would run.
    A = start_app("appA", spec_a, u0)
    Bp = start_app("appB", spec_b, u0)
    okA = wait_until(lambda: "GPU 0: memory limit 10Gi" in read(A.errpath)
                     and "GPU 0: compute limit 30%" in read(A.errpath), 15)
    ok(okA, "claim A's process gets 10Gi and 30 % from the scheduler (no annotation)",
       read(A.errpath))
    okB = wait_until(lambda: "GPU 0: memory limit 4Gi" in read(Bp.errpath)
                     and "GPU 0: compute limit 50%" in read(Bp.errpath), 15)
    ok(okB, "claim B's process gets 4Gi and 50 %: its Pod's annotation of 80 % cannot "
       "raise the claim's ceiling", read(Bp.errpath))
    ca_ = status_client(A.pid) or {}
    ok(ca_.get("tenant", {}).get("source") == "socket"
       and (ca_.get("pod") or {}).get("name") == "trainer-a"
       and ca_.get("ceiling") == {"core_limit": 30, "mem_limit": 10 * GiB}
       and limits_of(A.pid) == (30, 10 * GiB),
       "status: A is Pod team-a/trainer-a by its socket, ceiling and limits 30 %, 10Gi", ca_)
    # Annotations lower a share live.
    api_cmd({"op": "modify", "uid": UA, "annotations": {"nvshare.com/gpu-core-limit": "20",
                                                        "nvshare.com/gpu-memory-limit": "6Gi"}})
    ok(wait_until(lambda: "GPU 0: compute limit 20%" in read(A.errpath)
                  and "GPU 0: memory limit 6Gi" in read(A.errpath), 10),
       "an annotation lowers A's share live (20 %, 6Gi)", read(A.errpath))
    api_cmd({"op": "modify", "uid": UA, "annotations": {"nvshare.com/gpu-core-limit": "95",
                                                        "nvshare.com/gpu-memory-limit": "15Gi"}})
    ok(wait_until(lambda: limits_of(A.pid) == (30, 10 * GiB), 10),
       "an annotation above the claim (95 %, 15Gi) gives A the claim's 30 %, 10Gi back, no more",
       limits_of(A.pid))
    rc, out = ctl("--set-client", str(A.pid), "--core-limit", "90", "--memory-limit", "12Gi")
    ok(rc == 0 and "capped at the ceiling of its DRA claim" in out
       and wait_until(lambda: limits_of(A.pid) == (30, 10 * GiB), 5),
       "nvsharectl --set-client 90 %% 12Gi on A: capped at the claim (%s)" % out,
       limits_of(A.pid))
    return {"ka": ka, "kb": kb, "key_a": key_a, "A": A, "B": Bp, "g0": g0, "g1": g1, "u0": u0,
            "spec_a": spec_a, "spec_b": spec_b}


def scenario_refusals(p, kl, devs, s):
    """Over capacity, malformed claims, API errors: clear per-claim errors."""
    g0, g1 = s["g0"], s["g1"]

    def one(c, key=None):
        put_claim(c)
        k = key or (c["metadata"]["namespace"], c["metadata"]["uid"], c["metadata"]["name"])
        return kl.prepare([k]).get(k[1], ([], "no answer"))

    pods = [("small-c", "c0c0c0c0-0000-4000-8000-0000000000c1")]
    d, e = one(claim("team-c", "over-mem", "c2c2c2c2-0000-4000-8000-0000000000c1",
                     [{"request": "gpu", "device": g0, "memory": "4Gi", "cores": "5"}], pods))
    ok(not d and "GPU %s" % g0 in e and "consumes 4Gi of memory but 2Gi of 16Gi are left"
       in e and "2 other claim(s)" in e,
       "a claim over the GPU's remaining memory (10Gi + 4Gi + 4Gi > 16Gi) is refused, "
       "naming the GPU and what is left: %s" % e, e)
    d, e = one(claim("team-c", "over-cores", "c2c2c2c2-0000-4000-8000-0000000000c2",
                     [{"request": "gpu", "device": g0, "memory": "1Gi", "cores": "30"}], pods))
    ok(not d and "consumes 30 % of its cores but 20 % are left" in e,
       "a claim over the remaining cores (30 + 50 + 30 > 100) is refused: %s" % e, e)
    d, e = one(claim("team-c", "whole-gpu", "c2c2c2c2-0000-4000-8000-0000000000c3",
                     [{"request": "gpu", "device": g0}], pods))
    ok(not d and "16Gi of memory" in e,
       "a claim with no consumedCapacity is the whole GPU: refused where others run: %s" % e, e)
    bad = [
        ("junk-memory", [{"request": "gpu", "device": g1, "consumed": {"memory": "lots"}}],
         "consumedCapacity.memory is not a quantity (lots)"),
        ("cores-101", [{"request": "gpu", "device": g1, "memory": "1Gi", "cores": "101"}],
         "more than 100 % of a GPU"),
        ("no-such-gpu", [{"request": "gpu", "device": "gpu-nonexistent", "memory": "1Gi"}],
         "device gpu-nonexistent is not a GPU of node " + NODE),
        ("other-node", [{"request": "gpu", "device": g1, "memory": "1Gi", "pool": "node-9"}],
         "pool node-9 is not on this node"),
        ("other-driver", [{"request": "gpu", "device": g1, "memory": "1Gi",
                           "driver": "gpu.example.com"}], "has no device of driver " + DRIVER),
        ("no-device", [{"request": "gpu", "device": "", "memory": "1Gi"}],
         "results[0].device is missing"),
    ]
    got = []
    for i, (name, res, want) in enumerate(bad):
        uid = "c3c3c3c3-0000-4000-8000-0000000000%02x" % i
        d, e = one(claim("team-c", name, uid, res, pods))
        got.append((name, e))
        ok(not d and want in e and "team-c/" + name in e,
           "malformed claim %s refused: %s" % (name, e), e)
    c = claim("team-c", "not-allocated", "c4c4c4c4-0000-4000-8000-0000000000c1",
              [{"request": "gpu", "device": g1}], pods, allocated=False)
    d, e = one(c)
    ok(not d and "is not allocated" in e, "a claim not allocated is refused: %s" % e, e)
    c = claim("team-c", "uid-moved", "c4c4c4c4-0000-4000-8000-0000000000c2",
              [{"request": "gpu", "device": g1, "memory": "1Gi"}], pods)
    d, e = one(c, ("team-c", "c4c4c4c4-0000-4000-8000-0000000000ff", "uid-moved"))
    ok(not d and "has uid c4c4c4c4-0000-4000-8000-0000000000c2, the kubelet asked for" in e,
       "a claim whose UID is not the kubelet's (made again) is refused: %s" % e, e)
    k = ("team-c", "c4c4c4c4-0000-4000-8000-0000000000c3", "gone")
    d, e = kl.prepare([k])[k[1]]
    ok(not d and "the API server answered 404" in e and 'resourceclaims.resource.k8s.io "gone" '
       "not found" in e, "a claim the API server does not have: 404 in the error: %s" % e, e)
    k = ("Team C", "not-a-uid", "x/y")
    d, e = kl.prepare([k])["not-a-uid"]
    ok(not d and "not a claim" in e, "names the kubelet would never send are refused: %s" % e, e)
    ok(p.poll() is None, "the plugin is still running after %d refusals" % (len(bad) + 6))

    # API errors: 500, a dropped connection; the kubelet's retry works.
    ok_claim = claim("team-c", "retry", "c5c5c5c5-0000-4000-8000-0000000000c1",
                     [{"request": "gpu", "device": g1, "memory": "2Gi", "cores": "10"}], pods)
    put_claim(ok_claim)
    k = ("team-c", ok_claim["metadata"]["uid"], "retry")
    api_cmd({"op": "fail", "match": "resourceclaims/retry", "code": 500, "n": 1})
    d, e = kl.prepare([k])[k[1]]
    ok(not d and "the API server answered 500: injected failure 500" in e,
       "API server 500: Prepare fails for that claim, saying so: %s" % e, e)
    # Twice: libcurl retries once on a fresh connection by itself when a
    # reused one dies before any answer.
    api_cmd({"op": "fail", "match": "resourceclaims/retry", "code": 0, "n": 2})
    d, e = kl.prepare([k])[k[1]]
    ok(not d and "cannot read ResourceClaim team-c/retry: GET https://" in e,
       "API connection dropped: Prepare fails, saying so: %s" % e, e)
    d, e = kl.prepare([k])[k[1]]
    ok(d and not e, "the kubelet's retry prepares it", e)
    err = kl.unprepare([k])
    ok(err == {k[1]: ""}, "... and unprepares it", err)


def scenario_health():
    """Fake NVML: a GPU lost and back, the slice and the health stream
    follow; a restart with another GPU set replaces the slice; strays go."""
    ga = "GPU-aaaaaaaa-1111-4000-8000-000000000001"
    gb = "GPU-bbbbbbbb-2222-4000-8000-000000000002"
    gc = "GPU-cccccccc-3333-4000-8000-000000000003"
    lost = os.path.join(T, "lost")
    open(lost, "w").close()
    node = "node-2"
    stray = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"name": "node-2-gpu.nvshare.com-old"},
             "spec": {"driver": DRIVER, "nodeName": node, "pool": {
                 "name": node, "generation": 7, "resourceSliceCount": 1}, "devices": []}}
    other = json.loads(json.dumps(stray))
    other["metadata"]["name"] = "node-2-gpu.example.com"
    other["spec"]["driver"] = "gpu.example.com"
    api_cmd({"op": "slice", "slice": stray})
    api_cmd({"op": "slice", "slice": other})
    env = {"LD_LIBRARY_PATH": FAKE_NVML_DIR, "FAKE_NVML_GPUS": ga + "," + gb,
           "FAKE_NVML_LOST_FILE": lost}
    p = start_plugin("p2", node, ["--health-interval", "200ms", "--gpu-memory-size", "8Gi",
                                  "--memory-oversubscription", "1.5"], env)
    got = wait_until(lambda: slice_of(node) is not None, 10)
    s = slice_of(node) or {}
    names = [d["name"] for d in s.get("spec", {}).get("devices", [])]
    ok(got and names == ["gpu-aaaaaaaa-1111-4000-8000-000000000001",
                         "gpu-bbbbbbbb-2222-4000-8000-000000000002"],
       "fake NVML, two GPUs: two devices", (names, log_of(p)))
    mem = s.get("spec", {}).get("devices", [{}])[0].get("capacity", {}).get("memory", {})
    at = s.get("spec", {}).get("devices", [{}])[0].get("attributes", {})
    ok(mem.get("value") == "24Gi" and at.get("physicalMemory") == {"int": 16 * GiB},
       "--memory-oversubscription 1.5 of a 16Gi GPU: memory capacity 24Gi, physicalMemory "
       "16Gi (NVML's size wins over --gpu-memory-size)", (mem, at))
    sl = read_json(SLICES) or {}
    ok("node-2-gpu.nvshare.com-old" not in sl and "node-2-gpu.example.com" in sl,
       "a stray slice of this driver and node is deleted, another driver's is left alone",
       sorted(sl))
    gen0 = s.get("spec", {}).get("pool", {}).get("generation", 0)
    kl = kubelet("p2")
    kl.register()
    kl.watch_health()
    ok(kl.wait(lambda: kl.health and [h for _, h, _ in kl.health[-1]] == [1, 1], 5),
       "health stream: both GPUs HEALTHY at once", kl.health)
    ka = kubelet("p2")
    ka.register()
    ka.watch_health(HEALTH_ALPHA)
    ok(ka.wait(lambda: ka.health and [h for _, h, _ in ka.health[-1]] == [1, 1], 5),
       "health stream as 1.34/1.35 kubelets call it (v1alpha1.DRAResourceHealth): the same",
       ka.health)
    ka.stop()
    with open(lost, "w") as f:
        f.write(ga + "\n")
    ok(wait_until(lambda: [d["name"] for d in (slice_of(node) or {}).get("spec", {})
                           .get("devices", [])] == [names[1]], 10)
       and slice_of(node)["spec"]["pool"]["generation"] == gen0 + 1,
       "GPU lost: the slice is replaced without it, pool generation + 1", slice_of(node))
    ok(kl.wait(lambda: kl.health and [(d, h) for d, h, _ in kl.health[-1]]
               == [(names[0], 2), (names[1], 1)], 5),
       "health stream: the lost GPU UNHEALTHY", kl.health[-1:])
    c = claim("team-h", "on-lost", "c6c6c6c6-0000-4000-8000-0000000000c1",
              [{"request": "gpu", "device": names[0], "memory": "1Gi", "pool": node}],
              [("h", "c0c0c0c0-0000-4000-8000-0000000000d1")])
    put_claim(c)
    k = ("team-h", c["metadata"]["uid"], "on-lost")
    d, e = kl.prepare([k])[k[1]]
    ok(not d and "is unhealthy" in e, "Prepare on the lost GPU is refused: %s" % e, e)
    open(lost, "w").close()
    ok(wait_until(lambda: len((slice_of(node) or {}).get("spec", {}).get("devices", [])) == 2, 10),
       "GPU back: the slice lists it again", slice_of(node))
    ok(kl.wait(lambda: [h for _, h, _ in kl.health[-1]] == [1, 1], 5),
       "health stream: HEALTHY again", kl.health[-1:])
    # Someone deletes the slice: put back at the resync.
    kl.stop()
    ok(stop(p) == 0, "SIGTERM: exit 0", log_of(p))
    gen1 = slice_of(node)["spec"]["pool"]["generation"]
    env["FAKE_NVML_GPUS"] = ga + "," + gb + "," + gc
    p = start_plugin("p2", node, ["--health-interval", "200ms", "--gpu-memory-size", "8Gi",
                                  "--slice-resync", "1s"], env)
    ok(wait_until(lambda: len((slice_of(node) or {}).get("spec", {}).get("devices", [])) == 3, 10)
       and slice_of(node)["spec"]["pool"]["generation"] == gen1 + 1
       and len([x for x in read_json(SLICES) if x.startswith("node-2-gpu.nvshare")]) == 1,
       "restarted with three GPUs: the same slice replaced (generation + 1), no second one",
       slice_of(node))
    api_cmd({"op": "slice_delete", "name": "node-2-gpu.nvshare.com"})
    ok(wait_until(lambda: slice_of(node) is not None, 10),
       "a slice deleted by someone else is put back at the next resync", log_of(p))
    api_cmd({"op": "fail", "match": "resourceslices", "code": 503, "n": 3})
    api_cmd({"op": "slice_delete", "name": "node-2-gpu.nvshare.com"})
    ok(wait_until(lambda: slice_of(node) is not None
                  and "the API server works again" in log_of(p), 30)
       and "the API server answered 503" in log_of(p),
       "API errors while publishing (three 503s): logged, retried, published", log_of(p))
    stop(p)


def scenario_kubelet_restart(p, kl, s):
    """The kubelet goes and comes back; v1beta1; registration socket removed."""
    ka = s["ka"]
    kl.stop()
    n_get = claim_gets("team-a", "trainer-a-gpu")
    kl2 = kubelet("p1")
    info = kl2.register()
    ok(info.name == DRIVER, "a restarted kubelet registers the driver again (GetInfo)")
    r = kl2.prepare([ka])
    d, e = r[ka[1]]
    ok(not e and d and d[0][3][0] == "nvshare.com/claim=%s-%s" % (ka[1], s["g0"])
       and claim_gets("team-a", "trainer-a-gpu") == n_get,
       "Prepare again after the restart: the same devices, from the driver's record "
       "(no API call)", (d, e))
    kb = kubelet("p1", prefer="v1beta1")
    kb.register()
    d, e = kb.prepare([ka])[ka[1]]
    ok(kb.version == "v1beta1" and not e and d,
       "a kubelet that speaks v1beta1 (Kubernetes 1.32, 1.33) prepares through "
       "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", (kb.version, e))
    kb.stop()
    reg = os.path.join(T, "p1", "registry", DRIVER + "-reg.sock")
    os.unlink(reg)
    ok(wait_until(lambda: os.path.exists(reg), 10) and "was removed: listening again" in log_of(p),
       "registration socket removed: the plugin listens again", log_of(p))
    kl3 = kubelet("p1")
    ok(kl3.register().name == DRIVER, "... and the plugin watcher registers it again")
    return kl3


def scenario_restart(p, kl, s):
    """Checkpoint: a killed plugin recovers its prepared claims."""
    ka, kb = s["ka"], s["kb"]
    ckpt = os.path.join(T, "p1", "plugin", "checkpoint.json")
    c = read_json(ckpt) or {}
    ok(sorted(x["uid"] for x in c.get("claims", [])) == sorted([ka[1], kb[1]])
       and re.fullmatch("[0-9a-f]{16}", c.get("checksum", "")),
       "checkpoint lists the two prepared claims, with a checksum", c)
    stop(p, signal.SIGKILL)
    # A restarted node's /var/run: the CDI spec of A is gone.
    spec_a = os.path.join(T, "p1", "cdi", "nvshare.com-claim_%s.json" % ka[1])
    os.unlink(spec_a)
    api_cmd({"op": "fail", "match": "resourceclaims/trainer", "code": 500, "n": 100})
    p = start_plugin("p1")
    ok(wait_until(lambda: "2 prepared claim(s) recovered" in log_of(p), 10)
       and wait_until(lambda: os.path.exists(spec_a), 5),
       "restarted after SIGKILL: two claims recovered from the checkpoint, A's CDI spec "
       "rewritten", log_of(p))
    kl.stop()
    kl = kubelet("p1")
    kl.register()
    d, e = kl.prepare([ka])[ka[1]]
    ok(d and not e, "Prepare of A after the restart answers from the checkpoint while the "
       "API server fails", e)
    api_cmd({"op": "fail", "match": "resourceclaims/trainer", "code": 500, "n": 0})
    over = claim("team-c", "over-after-restart", "c7c7c7c7-0000-4000-8000-0000000000c1",
                 [{"request": "gpu", "device": s["g0"], "memory": "4Gi", "cores": "5"}],
                 [("small-c", "c0c0c0c0-0000-4000-8000-0000000000c1")])
    put_claim(over)
    k = ("team-c", over["metadata"]["uid"], "over-after-restart")
    d, e = kl.prepare([k])[k[1]]
    ok(not d and "2Gi of 16Gi are left" in e,
       "the recovered claims still count: 4Gi more on the GPU is refused: %s" % e, e)
    # Unprepare B: its binding, socket, CDI spec and checkpoint entry go.
    key_b = [m["hostPath"] for m in s["spec_b"]["containerEdits"]["mounts"]
             if m["containerPath"] == "/var/run/nvshare"][0].rsplit("/", 1)[-1]
    err = kl.unprepare([kb])
    ok(err == {kb[1]: ""}, "NodeUnprepareResources of B after the restart", err)
    ok(not os.path.exists(os.path.join(SOCK, "bindings", key_b + ".json"))
       and not os.path.exists(os.path.join(T, "p1", "cdi", "nvshare.com-claim_%s.json" % kb[1]))
       and [x["uid"] for x in read_json(ckpt)["claims"]] == [ka[1]],
       "Unprepare removed B's binding, CDI spec and checkpoint entry")
    # Both awaited: the socket goes before the event is written.
    ok(wait_until(lambda: not os.path.exists(os.path.join(SOCK, "pods", key_b, "scheduler.sock"))
                  and re.search(r'"event":"pod_socket_closed","key":"%s"' % key_b, events()),
                  5),
       "the scheduler closed B's Pod socket (pod_socket_closed): no new process gets a "
       "share of the claim")
    err = kl.unprepare([kb])
    ok(err == {kb[1]: ""}, "Unprepare again: nothing to do, no error", err)
    d, e = kl.prepare([k])[k[1]]
    ok(d and not e, "the 4Gi claim fits once B is unprepared", e)
    kl.unprepare([k])
    # A broken checkpoint: moved aside, the plugin starts empty.
    stop(p)
    with open(ckpt, "w") as f:
        f.write('{"version": 1, "claims": [')
    p = start_plugin("p1")
    ok(wait_until(lambda: "moved aside to .bad" in log_of(p), 10)
       and os.path.exists(ckpt + ".bad") and p.poll() is None,
       "a checkpoint cut short: logged, moved to .bad, the plugin runs", log_of(p))
    stop(p)
    os.rename(ckpt + ".bad", ckpt + ".bad1")
    return kl


def scenario_unprepare_and_shared(s):
    """Unprepare A; a claim shared by two Pods; the flags."""
    ka = s["ka"]
    # The checkpoint was broken on purpose: claim A is known to nobody now.
    # Prepare it again from the API (a kubelet would), then unprepare.
    p = start_plugin("p1")
    kl = kubelet("p1")
    kl.register()
    d, e = kl.prepare([ka])[ka[1]]
    ok(d and not e, "claim A prepared again from the API after the checkpoint was lost", e)
    key_a = s["key_a"]
    err = kl.unprepare([ka])
    ok(err == {ka[1]: ""} and not os.path.exists(os.path.join(SOCK, "bindings", key_a + ".json"))
       and wait_until(lambda: not os.path.exists(os.path.join(SOCK, "pods", key_a)), 5),
       "Unprepare A: binding gone, its Pod socket and directory closed by the scheduler", err)
    ok(s["A"].poll() is None and limits_of(s["A"].pid) == (30, 10 * GiB),
       "A's process, still connected, keeps the ceiling it was accepted with",
       limits_of(s["A"].pid))

    # A claim that two Pods share (a ResourceClaim, not from a template).
    g1 = s["g1"]
    u1 = [d_ for d_ in (slice_of() or {})["spec"]["devices"] if d_["name"] == g1][0][
        "attributes"]["uuid"]["string"]
    c = claim("team-c", "shared", "c8c8c8c8-0000-4000-8000-0000000000c1",
              [{"request": "gpu", "device": g1, "memory": "3Gi", "cores": "40"}],
              [("notebook-c", UC), ("notebook-d", UD)], owner=False)
    put_claim(c)
    k = ("team-c", c["metadata"]["uid"], "shared")
    d, e = kl.prepare([k])[k[1]]
    ok(d and not e, "a claim reserved for two Pods is prepared", e)
    spec = read_json(os.path.join(T, "p1", "cdi", "nvshare.com-claim_%s.json" % k[1]))
    key = [m["hostPath"] for m in spec["containerEdits"]["mounts"]
           if m["containerPath"] == "/var/run/nvshare"][0].rsplit("/", 1)[-1]
    bind = read_json(os.path.join(SOCK, "bindings", key + ".json"))
    ok(bind == {"namespace": "team-c", "origin": "dra", "claim": "team-c/shared",
                "core_limit": 40, "memory_limit": 3 * GiB},
       "its binding names no Pod, only the ceiling", bind)
    C = start_app("appC", spec, u1, cgroup=cg_of(UC))
    D = start_app("appD", spec, u1, cgroup=cg_of(UD))
    ok(wait_until(lambda: "GPU 0: compute limit 10%" in read(C.errpath)
                  and "GPU 0: memory limit 3Gi" in read(C.errpath), 15),
       "Pod C's process (its cgroup names C, annotation 10 %): 10 % and the claim's 3Gi",
       read(C.errpath))
    ok(wait_until(lambda: "GPU 0: compute limit 40%" in read(D.errpath)
                  and "GPU 0: memory limit 3Gi" in read(D.errpath), 15),
       "Pod D's process (no annotation): the claim's 40 %, 3Gi", read(D.errpath))
    cc = status_client(C.pid) or {}
    ok(cc.get("tenant", {}).get("source") == "cgroup"
       and (cc.get("pod") or {}).get("name") == "notebook-c",
       "each is its own Pod, by its cgroup", cc)
    kl.unprepare([k])
    kl.stop()
    ok(stop(p) == 0, "SIGTERM: exit 0", log_of(p))


def scenario_flags():
    bad = [["--driver-name", "NoDots"], ["--memory-oversubscription", "0.5"],
           ["--scheduler-wait", "0"], ["--cdi-driver-kind", "nvidia.com"],
           ["--host-socket-dir", "relative"], ["--node-name", "Bad_Node"]]
    wrong = []
    for a in bad:
        r = subprocess.run(plugin_args("flags", extra=a), capture_output=True, text=True,
                           timeout=guard(30))
        flag = a[0] if a[0] != "--host-socket-dir" else "absolute"
        if r.returncode != 2 or flag.lstrip("-") not in r.stderr:
            wrong.append((a, r.returncode, r.stderr.strip()))
    ok(not wrong, "bad flag values: exit 2 naming the flag", wrong)
    r = subprocess.run([PLUGIN, "--help"], capture_output=True, text=True)
    ok(r.returncode == 0 and "--scheduler-wait" in r.stdout and "DRA driver" in r.stdout,
       "--help", r.stdout[-300:])


def main():
    try:
        p, kl, devs = scenario_publish()
        if kl is None or len(devs) < 2:
            return 1
        s = scenario_prepare(p, kl, devs)
        if s is None:
            return 1
        scenario_refusals(p, kl, devs, s)
        kl = scenario_kubelet_restart(p, kl, s)
        kl = scenario_restart(p, kl, s)
        kl.stop()
        scenario_unprepare_and_shared(s)
        scenario_health()
        scenario_flags()
    finally:
        for x in procs:
            if x.poll() is None:
                x.kill()
                x.wait()
    return done()


if __name__ == "__main__":
    sys.exit(main())
