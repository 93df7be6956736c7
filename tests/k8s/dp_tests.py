"""Scenarios of t_device_plugin.sh: the real nvshare-device-plugin against
the fake kubelet (fake_kubelet.py). Prints TAP. Run by t_device_plugin.sh,
which sets B (build dir), T (private temp dir) and NVS_ROOT."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dptap import done, guard, ok, skip, wait_until  # noqa: E402
from fake_kubelet import GPU, MEM, FakeKubelet, load_messages  # noqa: E402

ROOT = os.environ["NVS_ROOT"]
B = os.environ["B"]
T = os.environ["T"]
PLUGIN = os.path.join(B, "nvshare-device-plugin")
FAKE_NVML_DIR = os.path.join(B, "tests", "k8s", "fakenvml")
SIM_NVML = os.path.join(B, "tests", "sim", "libnvidia-ml.so.1")

GA = "GPU-aaaaaaaa-1111-4000-8000-000000000001"
GB = "GPU-bbbbbbbb-2222-4000-8000-000000000002"

pb = load_messages(os.path.join(ROOT, "device-plugin"), os.path.join(T, "py"))
procs = []


def sock_dir(name):
    """The plugin's private --host-socket-dir (the scheduler's socket
    directory; Allocate makes pods/<key> in it)."""
    return os.path.join(T, "sock-" + name)


def start_plugin(name, plugin_dir, args, env_extra):
    env = dict(os.environ)
    env.pop("NVIDIA_VISIBLE_DEVICES", None)
    env.update(env_extra)
    log = open(os.path.join(T, name + ".log"), "w")
    # Private socket directory and PodResources socket (never the node's);
    # no PodResources serves here: Pod sockets are t_dp_podsock.sh's.
    own = ["--host-socket-dir", sock_dir(name), "--container-socket-dir", "/var/run/nvshare",
           "--pod-resources-socket", os.path.join(T, "podres-" + name, "kubelet.sock"),
           "--state-dir", os.path.join(T, "state-" + name)]
    p = subprocess.Popen([PLUGIN, "--kubelet-dir", plugin_dir] + own + args, env=env,
                         stdout=log, stderr=subprocess.STDOUT)
    p.logpath = log.name
    procs.append(p)
    return p


def log_of(p):
    with open(p.logpath) as f:
        return f.read()


# How long a plugin may take to end after SIGTERM: a hang guard, not a
# latency claim (no check here times the exit). On a loaded VM one exit was
# held 11 s in the kernel (close() of its inotify descriptor waiting for an
# SRCU grace period), past the 5 s this was.
EXIT_GUARD = 60


def rpc_error(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e
    return None


def envs_of(r):
    return dict(r.envs)


def mounts_of(r):
    return sorted((m.host_path, m.container_path, m.read_only) for m in r.mounts)


def ids(uuid, k):
    return ["%s__%d" % (uuid, i) for i in range(1, k + 1)]


def pod_dir(name, resource, devs, r, cpath="/var/run/nvshare"):
    """Where Allocate r mounted the container's socket directory (cpath)
    from, when that is <sock-dir>/pods/<key> (a key of 16 hex digits) whose
    record names this resource and these devices; else a text saying what
    was wrong (which no expected mount equals)."""
    got = [m.host_path for m in r.mounts if m.container_path == cpath]
    if len(got) != 1:
        return "no single mount at %s: %s" % (cpath, got)
    d, key = os.path.split(got[0])
    if d != os.path.join(sock_dir(name), "pods") or not re.fullmatch("[0-9a-f]{16}", key):
        return "not <sock-dir>/pods/<key>: " + got[0]
    try:
        with open(os.path.join(got[0], ".device-plugin.json")) as f:
            rec = json.load(f)
    except (OSError, ValueError) as e:
        return "no record in %s: %s" % (got[0], e)
    if (rec.get("resource"), rec.get("devices")) != (resource, sorted(devs)):
        return "record of %s: %s" % (got[0], rec)
    return got[0]


libdir = os.path.join(T, "lib")
os.makedirs(libdir)
open(os.path.join(libdir, "libnvshare.so"), "w").close()


def scenario_env_gpus():
    """GPUs from NVIDIA_VISIBLE_DEVICES (NVML present but failing), spread."""
    d = os.path.join(T, "dp1")
    os.makedirs(d)
    p = start_plugin("plugin1", d, ["--replicas", "4", "--host-lib-dir", libdir],
                     {"NVIDIA_VISIBLE_DEVICES": GA + "," + GB,
                      "LD_LIBRARY_PATH": FAKE_NVML_DIR, "FAKE_NVML_INIT_FAIL": "1"})
    waited = wait_until(lambda: "waiting for the kubelet" in log_of(p), 5)
    ok(waited and p.poll() is None, "plugin started before the kubelet waits for kubelet.sock",
       log_of(p))
    kl = FakeKubelet(d, pb)
    kl.start()
    t0 = time.monotonic()
    reg = kl.wait(lambda: kl.regs(GPU) and kl.regs(MEM), 5)
    ok(reg, "registers both resources once kubelet.sock appears (%.1fs)"
       % (time.monotonic() - t0), log_of(p))
    if not reg:
        return p, kl
    r = kl.regs(GPU)[0]
    ok(r.request.version == "v1beta1" and r.request.resource_name == "nvshare.com/gpu"
       and r.request.endpoint == "nvshare.sock"
       and r.request.options.get_preferred_allocation_available,
       "RegisterRequest: v1beta1, nvshare.com/gpu, endpoint nvshare.sock, preferred allocation",
       r.request)
    ok(r.options.get_preferred_allocation_available and r.options.pre_start_required
       and r.request.options.pre_start_required,
       "dial-back GetDevicePluginOptions answered while Register was pending "
       "(PreStartContainer required, in the RegisterRequest too)", r.options)
    got = kl.wait(lambda: kl.lists and kl.r(MEM).lists, 3)
    ok(got and kl.last_list(MEM) == [] and "memory size unknown" in log_of(p),
       "no NVML and no --gpu-memory-size: nvshare.com/gpu-memory has no units (logged)",
       kl.last_list(MEM))
    want = sorted(ids(GA, 4) + ids(GB, 4))
    lst = kl.last_list() or []
    ok(got and sorted(i for i, _ in lst) == want and all(h == "Healthy" for _, h in lst),
       "ListAndWatch sends 2 GPUs x 4 virtual devices at once, all Healthy", lst)
    time.sleep(1.5)
    ok(kl.streams_opened == 1 and kl.streams_ended == 0 and len(kl.lists) == 1,
       "ListAndWatch stays open and quiet while nothing changes",
       "opened %d ended %d lists %d" % (kl.streams_opened, kl.streams_ended, len(kl.lists)))

    pref = kl.preferred(want, [], 2)
    ok(sorted(x.split("__")[0] for x in pref) == [GA, GB],
       "GetPreferredAllocation spread: 2 devices on 2 different GPUs", pref)
    pref = kl.preferred([GA + "__4"] + ids(GB, 4), [], 1)
    ok(pref == [GB + "__1"], "spread prefers the GPU with more free slices", pref)
    pref = kl.preferred(ids(GA, 2) + ids(GB, 2), [GB + "__2"], 2)
    ok(pref[0] == GB + "__2" and pref[1].startswith(GA), "must_include comes first, then another GPU",
       pref)

    a = kl.allocate([GA + "__1"])
    e = envs_of(a)
    ok(e.get("LD_PRELOAD") == "/usr/local/nvshare/lib/libnvshare.so"
       and e.get("NVIDIA_VISIBLE_DEVICES") == GA and "NVSHARE_SOCK_DIR" not in e,
       "Allocate 1 device: LD_PRELOAD and NVIDIA_VISIBLE_DEVICES=<uuid>, default socket dir", e)
    want_dir = pod_dir("plugin1", GPU, [GA + "__1"], a)
    ok(mounts_of(a) == sorted([(libdir, "/usr/local/nvshare/lib", True),
                               (want_dir, "/var/run/nvshare", True)]),
       "Allocate mounts the library directory and the allocation's own socket directory "
       "<sock-dir>/pods/<key> (not the whole socket directory) read-only", mounts_of(a))
    ok(os.path.isdir(want_dir) and os.stat(want_dir).st_mode & 0o777 == 0o755,
       "... which exists, mode 0755, when Allocate answers (the kubelet mounts it)",
       os.path.exists(want_dir) and oct(os.stat(want_dir).st_mode))
    a = kl.allocate([GB + "__3", GA + "__2"])
    ok(envs_of(a).get("NVIDIA_VISIBLE_DEVICES") == GB + "," + GA,
       "Allocate 2 devices on 2 GPUs: both UUIDs, deduplicated", envs_of(a))
    err = rpc_error(lambda: kl.allocate([GA + "__1", GB + "__1", GA + "__3"]))
    ok(err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT
       and "same GPU" in err.details() and GA in err.details(),
       "two slices of one GPU in one container: INVALID_ARGUMENT naming the GPU",
       err and err.details())
    err = rpc_error(lambda: kl.allocate(["GPU-zzzz__1"]))
    err2 = rpc_error(lambda: kl.allocate([GA + "__5"]))
    ok(err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT
       and err2 is not None and "unknown device" in err2.details(),
       "unknown GPU or slice number: INVALID_ARGUMENT", err2 and err2.details())

    # Kubelet restart: sockets deleted, kubelet.sock created again.
    before, before_mem = len(kl.regs(GPU)), len(kl.regs(MEM))
    kl.restart()
    t0 = time.monotonic()
    reg = kl.wait(lambda: len(kl.regs(GPU)) > before and len(kl.regs(MEM)) > before_mem, 8)
    ok(reg, "re-registers both resources after a kubelet restart (%.1fs)"
       % (time.monotonic() - t0), log_of(p))
    nl = len(kl.lists)
    got = kl.wait(lambda: len(kl.lists) > nl or (reg and kl.streams_opened >= 2 and kl.lists), 3)
    lst = kl.last_list() or []
    ok(got and sorted(i for i, _ in lst) == want and os.path.exists(os.path.join(d, "nvshare.sock")),
       "after the restart: socket back, new ListAndWatch with all devices", lst)

    # Our socket deleted while the kubelet stays.
    before = len(kl.regs(GPU))
    os.unlink(os.path.join(d, "nvshare.sock"))
    reg = kl.wait(lambda: len(kl.regs(GPU)) > before, 8)
    ok(reg and os.path.exists(os.path.join(d, "nvshare.sock")),
       "own socket deleted: listens again and re-registers", log_of(p))
    a = rpc_error(lambda: kl.allocate([GB + "__1"]))
    ok(a is None, "Allocate works on the new endpoint", a and a.details())
    return p, kl


def scenario_nvml_health():
    """GPUs from a fake NVML; one is lost, then comes back; pack policy."""
    d = os.path.join(T, "dp2")
    os.makedirs(d)
    lost = os.path.join(T, "lost")
    open(lost, "w").close()
    kl = FakeKubelet(d, pb)
    kl.start()
    p = start_plugin("plugin2", d, ["--replicas", "3", "--allocation-policy", "pack",
                                    "--health-interval", "200ms", "--host-lib-dir", libdir,
                                    "--container-socket-dir", "/run/nvshare-x"],
                     {"LD_LIBRARY_PATH": FAKE_NVML_DIR, "FAKE_NVML_GPUS": GA + "," + GB,
                      "FAKE_NVML_LOST_FILE": lost})
    got = kl.wait(lambda: kl.lists, 5)
    lst = kl.last_list() or []
    ok(got and sorted(i for i, _ in lst) == sorted(ids(GA, 3) + ids(GB, 3))
       and "from NVML" in log_of(p),
       "GPUs from NVML: 2 x 3 virtual devices", log_of(p))
    if not got:
        return p, kl
    pref = kl.preferred([GA + "__2"] + ids(GB, 3), [], 1)
    ok(pref == [GA + "__2"], "GetPreferredAllocation pack: the GPU with fewest free slices", pref)
    pref = kl.preferred([GA + "__2"] + ids(GB, 3), [], 2)
    ok(pref == [GA + "__2", GB + "__1"], "pack with 2 devices still uses 2 different GPUs", pref)
    a = kl.allocate([GB + "__2"])
    e = envs_of(a)
    ok(e.get("NVSHARE_SOCK_DIR") == "/run/nvshare-x"
       and (pod_dir("plugin2", GPU, [GB + "__2"], a, "/run/nvshare-x"), "/run/nvshare-x", True) in mounts_of(a),
       "non-default container socket dir: NVSHARE_SOCK_DIR set and mounted there",
       (e, mounts_of(a)))

    nl = len(kl.lists)
    with open(lost, "w") as f:
        f.write(GA + "\n")
    got = kl.wait(lambda: len(kl.lists) > nl, 5)
    lst = dict(kl.last_list() or [])
    ok(got and all(lst[i] == "Unhealthy" for i in ids(GA, 3))
       and all(lst[i] == "Healthy" for i in ids(GB, 3)),
       "GPU lost (NVML_ERROR_GPU_IS_LOST): its devices are re-sent Unhealthy", lst)
    nl = len(kl.lists)
    open(lost, "w").close()
    got = kl.wait(lambda: len(kl.lists) > nl, 5)
    lst = dict(kl.last_list() or [])
    ok(got and all(h == "Healthy" for h in lst.values()),
       "GPU back: Healthy again", lst)
    ok(len(kl.regs(GPU)) == 1 and kl.streams_opened == 1 and kl.streams_ended == 0,
       "health changes travel on the one open stream",
       "registrations %d streams %d/%d" % (len(kl.regs(GPU)), kl.streams_opened,
                                           kl.streams_ended))
    return p, kl


def scenario_refusals():
    """Rejected registration is retried; a missing library fails Allocate."""
    d = os.path.join(T, "dp3")
    os.makedirs(d)
    kl = FakeKubelet(d, pb)
    kl.reject = 1
    kl.start()
    p = start_plugin("plugin3", d, ["--host-lib-dir", os.path.join(T, "nolib"),
                                    "--replicas", "2", "--no-memory-resource"],
                     {"NVIDIA_VISIBLE_DEVICES": GA, "LD_LIBRARY_PATH": FAKE_NVML_DIR,
                      "FAKE_NVML_INIT_FAIL": "1"})
    reg = kl.wait(lambda: kl.registrations, 10)
    ok(reg and kl.rejected == 1, "a rejected registration is retried", log_of(p))
    ok(not kl.regs(MEM) and not os.path.exists(os.path.join(d, "nvshare-memory.sock")),
       "--no-memory-resource: nvshare.com/gpu only", [x.request for x in kl.registrations])
    if reg:
        err = rpc_error(lambda: kl.allocate([GA + "__1"]))
        ok(err is not None and err.code() == grpc.StatusCode.FAILED_PRECONDITION
           and "libnvshare.so" in err.details(),
           "library missing on the node: Allocate fails with FAILED_PRECONDITION",
           err and err.details())
    return p, kl


def scenario_sim():
    """GPUs from tests/sim's fake NVML (NVSHARE_SIM_GPUS=2), when built."""
    if not os.path.exists(SIM_NVML):
        skip("GPUs from the simulated NVML (tests/sim)", "tests/sim libnvidia-ml.so.1 not built")
        return None, None
    d = os.path.join(T, "dp4")
    os.makedirs(d)
    kl = FakeKubelet(d, pb)
    kl.start()
    p = start_plugin("plugin4", d, ["--replicas", "2", "--host-lib-dir", libdir],
                     {"LD_LIBRARY_PATH": os.path.dirname(SIM_NVML), "NVSHARE_SIM_GPUS": "2"})
    got = kl.wait(lambda: kl.lists, 5)
    lst = kl.last_list() or []
    uuids = sorted({i.rsplit("__", 1)[0] for i, _ in lst})
    ok(got and len(uuids) == 2 and len(lst) == 4 and "from NVML" in log_of(p),
       "GPUs from the simulated NVML: 2 GPUs x 2", log_of(p))
    if len(uuids) == 2:
        a = kl.allocate([uuids[0] + "__1", uuids[1] + "__2"])
        ok(envs_of(a).get("NVIDIA_VISIBLE_DEVICES") == ",".join(uuids),
           "Allocate across the 2 simulated GPUs", envs_of(a))
    return p, kl


def scenario_memory():
    """nvshare.com/gpu-memory: 16 GiB fake NVML GPUs, 2 GiB units, 1.5x."""
    d = os.path.join(T, "dp5")
    os.makedirs(d)
    lost = os.path.join(T, "lost5")
    open(lost, "w").close()
    kl = FakeKubelet(d, pb)
    kl.start()
    p = start_plugin("plugin5", d, ["--replicas", "3", "--health-interval", "200ms",
                                    "--host-lib-dir", libdir, "--memory-unit", "2Gi",
                                    "--memory-oversubscription", "1.5"],
                     {"LD_LIBRARY_PATH": FAKE_NVML_DIR, "FAKE_NVML_GPUS": GA + "," + GB,
                      "FAKE_NVML_LOST_FILE": lost})
    reg = kl.wait(lambda: kl.regs(GPU) and kl.regs(MEM) and kl.lists and kl.r(MEM).lists, 5)
    ok(reg, "both resources registered and listed", log_of(p))
    if not reg:
        return p, kl
    r = kl.regs(MEM)[0]
    ok(r.request.endpoint == "nvshare-memory.sock" and kl.regs(GPU)[0].request.endpoint
       == "nvshare.sock" and r.request.options.get_preferred_allocation_available
       and r.options.get_preferred_allocation_available,
       "nvshare.com/gpu-memory: own endpoint nvshare-memory.sock, preferred allocation",
       r.request)
    units = sorted(ids(GA, 12) + ids(GB, 12))
    lst = kl.last_list(MEM) or []
    ok(sorted(i for i, _ in lst) == units and all(h == "Healthy" for _, h in lst),
       "16 GiB x 1.5 / 2 GiB = 12 units <UUID>__<k> per GPU", lst)
    ok(sorted(i for i, _ in kl.last_list(GPU) or []) == sorted(ids(GA, 3) + ids(GB, 3)),
       "nvshare.com/gpu still 3 slices per GPU beside it", kl.last_list(GPU))

    avail = ids(GA, 3) + ids(GB, 12)[5:]          # GA 3 free, GB 7 free
    pref = kl.preferred(avail, [], 4, resource=MEM)
    ok(len(pref) == 4 and {x.split("__")[0] for x in pref} == {GB},
       "GetPreferredAllocation: 4 units on one GPU (the only one with 4 free)", pref)
    pref = kl.preferred(avail, [], 2, resource=MEM)
    ok(pref == [GB + "__6", GB + "__7"], "spread: the GPU with the most free units", pref)
    pref = kl.preferred(avail, [GA + "__3"], 2, resource=MEM)
    ok(pref == [GA + "__3", GA + "__1"], "must_include decides the GPU", pref)

    a = kl.allocate([GA + "__1", GA + "__2"], resource=MEM)
    e = envs_of(a)
    ok(e.get("LD_PRELOAD") == "/usr/local/nvshare/lib/libnvshare.so"
       and e.get("NVIDIA_VISIBLE_DEVICES") == GA
       and e.get("NVSHARE_GPU_MEMORY_REQUEST") == str(4 << 30)
       and e.get("NVSHARE_GPU_MEMORY_TOTAL") == str(16 << 30),
       "Allocate 2 units: the library, the GPU, NVSHARE_GPU_MEMORY_REQUEST=4Gi in bytes, "
       "NVSHARE_GPU_MEMORY_TOTAL", e)
    ok(mounts_of(a) == sorted([(libdir, "/usr/local/nvshare/lib", True),
                               (pod_dir("plugin5", MEM, [GA + "__1", GA + "__2"], a),
                                "/var/run/nvshare", True)]),
       "Allocate mounts the library and the allocation's socket directory as for "
       "nvshare.com/gpu (its record names nvshare.com/gpu-memory and the units)", mounts_of(a))
    a = kl.allocate([GA + "__4", GB + "__1", GB + "__2"], resource=MEM)
    e = envs_of(a)
    ok(e.get("NVIDIA_VISIBLE_DEVICES") == GB
       and e.get("NVSHARE_GPU_MEMORY_REQUEST") == str(6 << 30)
       and "span 2 GPUs" in log_of(p),
       "units spanning GPUs: the GPU holding most of them, the whole request, logged", e)
    err = rpc_error(lambda: kl.allocate([GA + "__13"], resource=MEM))
    ok(err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT
       and "unknown device" in err.details() and MEM in err.details(),
       "a unit number beyond the GPU's units: INVALID_ARGUMENT", err and err.details())

    nl = len(kl.r(MEM).lists)
    with open(lost, "w") as f:
        f.write(GA + "\n")
    got = kl.wait(lambda: len(kl.r(MEM).lists) > nl, 5)
    lst = dict(kl.last_list(MEM) or [])
    ok(got and all(lst[i] == "Unhealthy" for i in ids(GA, 12))
       and all(lst[i] == "Healthy" for i in ids(GB, 12)),
       "a lost GPU's memory units are re-sent Unhealthy", lst)
    return p, kl


def refused_flags(bad, also=None):
    """The flag sets in bad that do not stop the plugin with exit 2 and a
    message naming the flag (or the words also)."""
    res = []
    for a in bad:
        r = subprocess.run([PLUGIN, "--kubelet-dir", os.path.join(T, "noflags")] + a,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=guard(10))
        if r.returncode != 2 or (a[0] not in r.stderr and not (also and also in r.stderr)):
            res.append((a, r.returncode, r.stderr[-200:]))
    return res


def scenario_flags():
    """Memory flags out of range are refused before anything starts."""
    res = refused_flags([["--memory-unit", "0"], ["--memory-unit", "512Ki"],
                         ["--memory-unit", "2Ti"], ["--memory-oversubscription", "0"],
                         ["--memory-oversubscription", "65"],
                         ["--memory-oversubscription", "1.5x"], ["--gpu-memory-size", "0"],
                         ["--memory-socket-name", "nvshare.sock"],
                         ["--memory-socket-name", "a/b.sock"]])
    ok(not res, "bad --memory-* / --gpu-memory-size values: exit 2 naming the flag", res)


def scenario_strategies():
    """--device-list-strategy: envvar (default, above), volume-mounts,
    cdi-annotations, cdi-cri, and the CDI spec; --require-scheduler."""
    import json
    import re
    res = []
    # volume-mounts: the list as mounts of /dev/null, the variable names the directory.
    d = os.path.join(T, "dp-vm")
    os.makedirs(d)
    kl = FakeKubelet(d, pb)
    kl.start()
    p = start_plugin("plugin-vm", d, ["--host-lib-dir", libdir, "--device-list-strategy",
                                      "volume-mounts", "--require-scheduler"],
                     {"LD_LIBRARY_PATH": FAKE_NVML_DIR, "FAKE_NVML_GPUS": GA + "," + GB})
    got = kl.wait(lambda: kl.regs(GPU) and kl.regs(MEM), 5)
    ok(got, "volume-mounts: registered", log_of(p))
    if got:
        a = kl.allocate([GB + "__2", GA + "__1"])
        e, m = envs_of(a), mounts_of(a)
        root = "/var/run/nvidia-container-devices"
        ok(e.get("NVIDIA_VISIBLE_DEVICES") == root
           and ("/dev/null", root + "/" + GB, True) in m and ("/dev/null", root + "/" + GA, True) in m
           and (libdir, "/usr/local/nvshare/lib", True) in m and not a.cdi_devices
           and not a.annotations,
           "volume-mounts: NVIDIA_VISIBLE_DEVICES=%s and /dev/null mounted at %s/<uuid> per GPU"
           % (root, root), (e, m))
        ok(e.get("NVSHARE_REQUIRE_SCHEDULER") == "1" and e.get("LD_PRELOAD"),
           "--require-scheduler: containers get NVSHARE_REQUIRE_SCHEDULER=1", e)
        a = kl.allocate([GA + "__3"], resource=MEM)
        ok(envs_of(a).get("NVIDIA_VISIBLE_DEVICES") == root
           and ("/dev/null", root + "/" + GA, True) in mounts_of(a),
           "volume-mounts for nvshare.com/gpu-memory too", mounts_of(a))
    res.append((p, kl))

    # CDI: a device root with /dev/nvidia10 (GA's minor in the fake NVML),
    # nvidiactl and nvidia-uvm, not GB's node nor nvidia-uvm-tools.
    devroot = os.path.join(T, "devroot")
    os.makedirs(os.path.join(devroot, "dev"))
    for n_ in ("nvidia10", "nvidiactl", "nvidia-uvm"):
        open(os.path.join(devroot, "dev", n_), "w").close()
    spec_dir = os.path.join(T, "cdi", "run")
    d = os.path.join(T, "dp-cdi")
    os.makedirs(d)
    kl = FakeKubelet(d, pb)
    kl.start()
    p = start_plugin("plugin-cdi", d, ["--host-lib-dir", libdir, "--device-list-strategy",
                                       "cdi-annotations,cdi-cri", "--cdi-spec-dir", spec_dir,
                                       "--cdi-dev-root", devroot],
                     {"LD_LIBRARY_PATH": FAKE_NVML_DIR, "FAKE_NVML_GPUS": GA + "," + GB})
    got = kl.wait(lambda: kl.regs(GPU) and kl.regs(MEM), 5)
    ok(got, "cdi-annotations,cdi-cri: registered", log_of(p))
    spec_path = os.path.join(spec_dir, "nvshare.com-gpu.json")
    spec = None
    try:
        with open(spec_path) as f:
            spec = json.load(f)
    except (OSError, ValueError) as ex:
        spec = None
        ok(False, "CDI spec written to --cdi-spec-dir/nvshare.com-gpu.json", ex)
    if spec is not None:
        devs = {x["name"]: x for x in spec.get("devices", [])}
        name_re = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
        ok(spec.get("cdiVersion") == "0.5.0" and spec.get("kind") == "nvshare.com/gpu"
           and set(devs) == {GA, GB, "0", "1", "all"} and all(name_re.match(k) for k in devs),
           "CDI spec: kind nvshare.com/gpu, devices by UUID, by index and all (as nvidia-ctk)",
           spec)
        nodes = lambda k: devs.get(k, {}).get("containerEdits", {}).get("deviceNodes")
        g10 = {"path": "/dev/nvidia10", "hostPath": os.path.join(devroot, "dev", "nvidia10")}
        ctl = [{"path": "/dev/" + x, "hostPath": os.path.join(devroot, "dev", x)}
               for x in ("nvidiactl", "nvidia-uvm")]
        ok(nodes(GA) == [g10] and nodes("0") == [g10] and nodes("all") == [g10],
           "CDI spec: each GPU's /dev/nvidia<minor> (NVML's minor), only where the node exists",
           devs)
        ok(nodes(GB) == ctl and nodes("1") == ctl,
           "CDI spec: a GPU whose node is missing edits the control nodes (no empty device)",
           devs.get(GB))
        common = [x["path"] for x in spec.get("containerEdits", {}).get("deviceNodes", [])]
        ok(common == ["/dev/nvidiactl", "/dev/nvidia-uvm"],
           "CDI spec: the control nodes that exist (nvidiactl, nvidia-uvm) for every device",
           common)
    if got:
        a = kl.allocate([GB + "__2", GA + "__1"])
        want = ["nvshare.com/gpu=" + GB, "nvidia.com/gpu=" + GB,
                "nvshare.com/gpu=" + GA, "nvidia.com/gpu=" + GA]
        ok([c.name for c in a.cdi_devices] == want,
           "cdi-cri: CDIDevices name ours and the driver's (nvidia.com/gpu) per GPU",
           [c.name for c in a.cdi_devices])
        ann = dict(a.annotations)
        ok(ann == {"cdi.k8s.io/nvshare-device-plugin_nvshare.com_gpu": ",".join(want)},
           "cdi-annotations: cdi.k8s.io/nvshare-device-plugin_<resource> lists the same", ann)
        e = envs_of(a)
        ok("NVIDIA_VISIBLE_DEVICES" not in e and e.get("LD_PRELOAD")
           and (libdir, "/usr/local/nvshare/lib", True) in mounts_of(a)
           and "NVSHARE_REQUIRE_SCHEDULER" not in e,
           "CDI only: no NVIDIA_VISIBLE_DEVICES; the library and socket still come with "
           "the response (the kubelet applies them on every runtime)", (e, mounts_of(a)))
        a = kl.allocate([GA + "__2"], resource=MEM)
        ok(dict(a.annotations).get("cdi.k8s.io/nvshare-device-plugin_nvshare.com_gpu-memory")
           == "nvshare.com/gpu=%s,nvidia.com/gpu=%s" % (GA, GA),
           "nvshare.com/gpu-memory: its own annotation key, the unit's GPU", dict(a.annotations))
    res.append((p, kl))

    # Only our kind, and envvar beside CDI.
    d = os.path.join(T, "dp-cdi2")
    os.makedirs(d)
    kl = FakeKubelet(d, pb)
    kl.start()
    p = start_plugin("plugin-cdi2", d, ["--host-lib-dir", libdir, "--device-list-strategy",
                                        "envvar,cdi-cri", "--cdi-spec-dir", spec_dir + "2",
                                        "--cdi-dev-root", devroot,
                                        "--cdi-driver-kind", "none", "--no-memory-resource"],
                     {"LD_LIBRARY_PATH": FAKE_NVML_DIR, "FAKE_NVML_GPUS": GA})
    got = kl.wait(lambda: kl.regs(GPU), 5)
    if got:
        a = kl.allocate([GA + "__1"])
        ok([c.name for c in a.cdi_devices] == ["nvshare.com/gpu=" + GA]
           and envs_of(a).get("NVIDIA_VISIBLE_DEVICES") == GA,
           "envvar,cdi-cri with --cdi-driver-kind none: the variable and our CDI device only",
           (envs_of(a), [c.name for c in a.cdi_devices]))
    else:
        ok(False, "envvar,cdi-cri: registered", log_of(p))
    res.append((p, kl))

    # Bad values: exit 2 naming the flag.
    wrong = refused_flags([["--device-list-strategy", "envvars"], ["--device-list-strategy", ""],
                           ["--device-list-strategy", "envvar,"],
                           ["--cdi-driver-kind", "nvidia.com"], ["--cdi-driver-kind", "a/b=c"],
                           ["--cdi-spec-dir", "relative/dir"]], also="absolute")
    ok(not wrong, "bad --device-list-strategy / --cdi-* values: exit 2 naming the flag", wrong)
    # An unwritable spec directory stops the plugin at start (a file in its way).
    blocker = os.path.join(T, "cdi-blocked")
    open(blocker, "w").close()
    r = subprocess.run([PLUGIN, "--kubelet-dir", os.path.join(T, "noflags"), "--host-lib-dir",
                        libdir, "--device-list-strategy", "cdi-cri", "--cdi-spec-dir",
                        os.path.join(blocker, "sub")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=guard(30), env=dict(os.environ, LD_LIBRARY_PATH=FAKE_NVML_DIR,
                                                   FAKE_NVML_GPUS=GA))
    ok(r.returncode == 1 and "CDI spec" in r.stdout and "cdi-blocked" in r.stdout,
       "CDI spec directory not writable: exit 1 naming it", r.stdout[-300:])
    empty = os.path.join(T, "devroot-empty")
    os.makedirs(os.path.join(empty, "dev"))
    r = subprocess.run([PLUGIN, "--kubelet-dir", os.path.join(T, "noflags"), "--host-lib-dir",
                        libdir, "--device-list-strategy", "cdi-annotations", "--cdi-spec-dir",
                        os.path.join(T, "cdi-empty"), "--cdi-dev-root", empty],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=guard(30), env=dict(os.environ, LD_LIBRARY_PATH=FAKE_NVML_DIR,
                                                   FAKE_NVML_GPUS=GA))
    ok(r.returncode == 1 and "no NVIDIA device node" in r.stdout,
       "CDI without the driver's device nodes: exit 1 saying so", r.stdout[-300:])
    return res


def shutdown(p, d, desc):
    if p is None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(guard(EXIT_GUARD))
    except subprocess.TimeoutExpired:
        rc = None
    ok(rc == 0 and not os.path.exists(os.path.join(d, "nvshare.sock"))
       and not os.path.exists(os.path.join(d, "nvshare-memory.sock")), desc,
       "rc=%s\n%s" % (rc, log_of(p)[-2000:]))


def probe(hf, kind, max_age="30s"):
    r = subprocess.run([PLUGIN, "--health-file", hf, "--probe", kind, "--probe-max-age", max_age],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=guard(10))
    return r.returncode, r.stdout.strip()


def scenario_health_probe():
    """--health-file and --probe live|ready: the kubelet's exec probes."""
    d = os.path.join(T, "dp-health")
    os.makedirs(d)
    hf = os.path.join(T, "dp-health.alive")
    p = start_plugin("plugin-health", d, ["--host-lib-dir", libdir, "--health-file", hf],
                     {"NVIDIA_VISIBLE_DEVICES": GA, "LD_LIBRARY_PATH": FAKE_NVML_DIR,
                      "FAKE_NVML_INIT_FAIL": "1"})
    ok(wait_until(lambda: os.path.exists(hf), 5), "the health file appears", log_of(p))
    rc, out = probe(hf, "live")
    ok(rc == 0, "probe live: ok while the loop runs (%s)" % out, out)
    rc, out = probe(hf, "ready")
    ok(rc == 1 and "0 of 2" in out, "probe ready: fails before the kubelet registered us (%s)"
       % out, out)
    kl = FakeKubelet(d, pb)
    kl.start()
    ok(wait_until(lambda: probe(hf, "ready")[0] == 0, 5),
       "probe ready: ok once both resources are registered", probe(hf, "ready")[1])
    p.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    failed_live = wait_until(lambda: probe(hf, "live", "1s")[0] == 1, 5)
    ok(failed_live, "SIGSTOP: probe live (max age 1s) fails within %.1fs (%s)"
       % (time.monotonic() - t0, probe(hf, "live", "1s")[1]))
    p.send_signal(signal.SIGCONT)
    ok(wait_until(lambda: probe(hf, "live", "1s")[0] == 0, 5), "SIGCONT: probe live ok again")
    rc, out = probe(hf, "sideways")
    ok(rc == 2, "--probe with a bad kind is a usage error", out)
    p.terminate()
    p.wait(guard(EXIT_GUARD))
    kl.stop()


def main():
    try:
        scenario_health_probe()
        p1, k1 = scenario_env_gpus()
        p2, k2 = scenario_nvml_health()
        p3, k3 = scenario_refusals()
        p4, k4 = scenario_sim()
        p5, k5 = scenario_memory()
        scenario_flags()
        strat = scenario_strategies()
        shutdown(p1, os.path.join(T, "dp1"), "SIGTERM: clean exit 0, both sockets removed")
        for p in (p2, p3, p4, p5):
            if p is not None:
                p.terminate()
                p.wait(guard(EXIT_GUARD))
        for k in (k1, k2, k3, k4, k5):
            if k is not None:
                k.stop()
        for p, k in strat:
            p.terminate()
            p.wait(guard(EXIT_GUARD))
            k.stop()
    finally:
        rc = done(procs)
    return rc


if __name__ == "__main__":
    sys.exit(main())
