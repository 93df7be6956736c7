"""Scenarios of t_dp_podsock.sh: Pod sockets end to end (docs/security.md
"Pod sockets"), with the real nvshare-device-plugin, the fake kubelet
(fake_kubelet.py) serving the device-plugin API and PodResources List, and a
real nvshare-scheduler sharing its socket directory with the plugin
(--host-socket-dir). Clients are tests/sched/fake_client processes with no
cgroup file in the scheduler's fake /proc: on the shared socket they are
unknown tenants; on the directory Allocate mounted, the binding's Pod.
Prints TAP. Run by t_dp_podsock.sh, which sets B, T, NVS_ROOT and the
scheduler's private NVSHARE_SOCK_DIR / NVSHARE_ADMIN_SOCK_DIR /
NVSHARE_EVENTS (tests/lib.sh).

Every wait is for a condition, bounded by a hang guard stretched by the
suite's speed factor. Reconciliation runs every 200 ms here; what must not
happen "for a while" is counted in PodResources lists served, never in
seconds."""

import json
import os
import signal
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dptap import done, guard, ok, wait_until  # noqa: E402
from fake_kubelet import GPU, MEM, SPEED, FakeKubelet, load_messages  # noqa: E402

ROOT = os.environ["NVS_ROOT"]
B = os.environ["B"]
T = os.environ["T"]
SOCK = os.environ["NVSHARE_SOCK_DIR"]
EVENTS = os.environ["NVSHARE_EVENTS"]
PLUGIN = os.path.join(B, "nvshare-device-plugin")
SCHED = os.path.join(B, "nvshare-scheduler")
FC = os.path.join(B, "tests", "sched", "fake_client")
FAKE_NVML_DIR = os.path.join(B, "tests", "k8s", "fakenvml")
PROC = os.environ["PROC"]
SHARED = os.path.join(SOCK, "scheduler.sock")
BIND = os.path.join(SOCK, "bindings")
PODS = os.path.join(SOCK, "pods")
STATE = os.path.join(T, "state")
STALE_LISTS = 10  # NVS_DP_STALE_LISTS (device-plugin/bindings.h)

GA = "GPU-aaaaaaaa-1111-4000-8000-000000000001"
GB = "GPU-bbbbbbbb-2222-4000-8000-000000000002"

pydir = os.path.join(T, "py")
pb = load_messages(os.path.join(ROOT, "device-plugin"), pydir)
prpb = load_messages(os.path.join(ROOT, "device-plugin"), pydir, "podresources")
procs = []
CLIENTS = {}  # fake clients by name
os.makedirs(PROC, exist_ok=True)
libdir = os.path.join(T, "lib")
os.makedirs(libdir)
open(os.path.join(libdir, "libnvshare.so"), "w").close()

# nvsharectl as a host process (tests/k8s_watch/k8s_lib.sh writes it).
CTL = os.path.join(T, "nvsharectl-host")


def log_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def start(name, argv, env=None):
    log = open(os.path.join(T, name + ".log"), "a")
    p = subprocess.Popen(argv, env=env or dict(os.environ), stdout=log,
                         stderr=subprocess.STDOUT)
    p.logpath = log.name
    procs.append(p)
    return p


def start_scheduler():
    s = start("scheduler", [SCHED] + os.environ["SCHED_ARGS"].split())
    up = wait_until(lambda: os.path.exists(SHARED) and stat.S_ISSOCK(os.stat(SHARED).st_mode), 10)
    return s, up


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(guard(60))
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def status():
    r = subprocess.run([CTL, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=guard(20))
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}


def client(pid):
    """The scheduler's status entry of the client with this pid, once it
    has one."""
    found = []

    def seen():
        for c in status().get("clients", []):
            if c.get("pid") == pid:
                found.append(c)
                return True
        return False

    wait_until(seen, 10)
    return found[-1] if found else None


def fc(name, sock_dir, cgroup=None):
    """A fake client connecting in sock_dir (what NVSHARE_SOCK_DIR is in a
    container: the mounted directory), with no cgroup file (nothing but the
    socket can say who it is), or with cgroup written as its
    <proc-root>/<pid>/cgroup before it connects. Returns its status entry."""
    env = dict(os.environ, NVSHARE_SOCK_DIR=sock_dir)
    argv = [FC, "--gpu-uuid", "GPU-id", "--name", name, "--script", "stay"]
    if cgroup is not None:
        argv = ["sh", "-c", 'd=$1/$$; mkdir -p "$d"; printf "%s\\n" "$2" >"$d/cgroup"; '
                'shift 2; exec "$@"', "sh", PROC, cgroup] + argv
    p = start(name, argv, env)
    CLIENTS[name] = p
    ready = wait_until(lambda: " READY" in log_text(os.path.join(T, name + ".log")), 10)
    return client(p.pid) if ready else None


def tenant(c):
    """(kind, source, namespace, name, Pod UID's last 2 digits, annotation
    core limit) of a client's status entry."""
    if not c:
        return None
    pod = c.get("pod") or {}
    return (c.get("tenant", {}).get("kind"), c.get("tenant", {}).get("source"),
            pod.get("namespace"), pod.get("name"), (pod.get("uid") or "")[-2:],
            pod.get("core_limit"))


def ino(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino if stat.S_ISSOCK(st.st_mode) else None


def key_of(r, cpath="/var/run/nvshare"):
    """The key of an Allocate answer: the last part of the directory it
    mounts at the container's socket directory, <sock-dir>/pods/<key>."""
    got = [m.host_path for m in r.mounts if m.container_path == cpath]
    if len(got) != 1 or os.path.dirname(got[0]) != PODS:
        return "bad mount %s" % got
    return os.path.basename(got[0])


def record(key):
    try:
        with open(os.path.join(PODS, key, ".device-plugin.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def record_pod(key):
    r = record(key) or {}
    p = r.get("pod") or {}
    return (p.get("namespace"), p.get("name")) if p else None


def sock_of(key):
    return os.path.join(PODS, key, "scheduler.sock")


def binding(key):
    try:
        with open(os.path.join(BIND, key + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def bound_to(key, ns, name):
    b = binding(key)
    return b is not None and (b.get("namespace"), b.get("name")) == (ns, name)


def events(name, key):
    out = []
    for line in log_text(EVENTS).splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a line being written
        if e.get("event") == name and e.get("key") == key:
            out.append(e)
    return out


def linked_to_shared(key):
    """pods/<key>/scheduler.sock is the shared socket (our hard link)."""
    a = ino(sock_of(key))
    return a is not None and a == ino(SHARED)


def scheduler_socket(key):
    """pods/<key>/scheduler.sock is a socket of its own (the scheduler's)."""
    a = ino(sock_of(key))
    return a is not None and a != ino(SHARED)


def start_plugin(kl, wait_s):
    env = dict(os.environ, NVIDIA_VISIBLE_DEVICES=GA + "," + GB, LD_LIBRARY_PATH=FAKE_NVML_DIR,
               FAKE_NVML_INIT_FAIL="1")
    return start("plugin", [PLUGIN, "--kubelet-dir", kl.dir, "--host-lib-dir", libdir,
                            "--host-socket-dir", SOCK, "--container-socket-dir",
                            "/var/run/nvshare", "--pod-resources-socket", kl.podres_sock(),
                            "--pod-resources-interval", "200ms", "--pod-socket-wait", wait_s,
                            "--state-dir", STATE, "--replicas", "8"], env)


def gone(key):
    return binding(key) is None and not os.path.exists(os.path.join(PODS, key))


def main_scenario():
    sched, up = start_scheduler()
    ok(up, "scheduler listens on its private socket directory", log_text(sched.logpath)[-1500:])
    # Identity by socket takes the Pod's UID and annotations from the watch:
    # wait for its first LIST (slow under ASan: clients came before it).
    ok(wait_until(lambda: "k8s: LIST:" in log_text(sched.logpath), 60),
       "the scheduler's Pod watch listed the node's Pods", log_text(sched.logpath)[-1500:])
    kdir = os.path.join(T, "kubelet")
    kl = FakeKubelet(kdir, pb, os.path.join(T, "pod-resources"), prpb)
    kl.start()
    wait_s = "%dms" % min(20000, int(3000 * SPEED))
    plog = os.path.join(T, "plugin.log")
    plugin = start_plugin(kl, wait_s)
    reg = kl.wait(lambda: kl.regs(GPU) and kl.regs(MEM), 10)
    ok(reg and kl.regs(GPU)[0].options.pre_start_required,
       "registered, with PreStartContainer required", log_text(plog)[-1500:])
    if not reg:
        return plugin, kl, sched
    keys = []  # every key Allocate gave

    # ---- Allocate, PreStartContainer, identity ----
    a1 = [GA + "__1"]
    r = kl.allocate(a1, pod=("team-a", "trainer"))
    k1 = key_of(r)
    keys.append(k1)
    mounts = [(m.host_path, m.container_path, m.read_only) for m in r.mounts]
    ok(len(k1) == 16 and all(c in "0123456789abcdef" for c in k1)
       and not any(m[0] == SOCK for m in mounts),
       "Allocate mounts <sock-dir>/pods/<key> (16 hex digits) at the container's socket "
       "directory, read-only, never the whole socket directory", mounts)
    rec = record(k1)
    ok(rec and {k: rec.get(k) for k in ("origin", "resource", "devices")}
       == {"origin": "device-plugin", "resource": GPU, "devices": a1}
       and isinstance(rec.get("seq"), int) and "pod" not in rec,
       "... the directory holds the allocation's record (resource, devices, seq; no Pod yet)",
       rec)
    cp = os.path.join(STATE, k1 + ".json")
    ok(os.path.exists(cp) and json.load(open(cp)) == rec
       and stat.S_IMODE(os.stat(STATE).st_mode) == 0o700,
       "... and its copy in --state-dir (0700), on the node's disk", rec)
    ok(linked_to_shared(k1) and binding(k1) is None,
       "before PreStartContainer: no binding, the directory's scheduler.sock is the shared "
       "socket (a hard link)", (ino(sock_of(k1)), ino(SHARED)))
    kl.prestart(a1)
    ok(bound_to(k1, "team-a", "trainer") and binding(k1).get("origin") == "device-plugin"
       and record_pod(k1) == ("team-a", "trainer"),
       "PreStartContainer writes bindings/<key>.json naming the Pod from PodResources "
       "(team-a/trainer, origin device-plugin); the record names it too", binding(k1))
    st = os.stat(os.path.join(BIND, k1 + ".json"))
    ok(stat.S_IMODE(st.st_mode) == 0o644 and st.st_uid == os.geteuid()
       and not [n for n in os.listdir(BIND) if n.endswith(".tmp")],
       "... mode 0644, the scheduler's user's, no temporary file left", oct(st.st_mode))
    ok(scheduler_socket(k1),
       "... and returns once the scheduler listens there (its own socket, not the link)",
       (ino(sock_of(k1)), ino(SHARED)))
    ok(wait_until(lambda: [e for e in events("pod_socket", k1) if e.get("pod") == "trainer"], 5),
       "the scheduler announced the Pod socket (pod_socket event)", events("pod_socket", k1))
    c = fc("p1", os.path.join(PODS, k1))
    ok(tenant(c) == ("pod", "socket", "team-a", "trainer", "a1", 5),
       "a client connecting in the mounted directory is Pod team-a/trainer (UID from the "
       "watch, its 5 % annotation), tenant source socket: it has no cgroup file at all", c)
    # A cgroup that says another Pod (team-b/next, systemd driver, v2).
    cg_b = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            "0a1b2c3d_0000_4000_8000_0000000000b1.slice/cri-containerd-%s.scope" % ("3f" * 32))
    c = fc("p1cg", os.path.join(PODS, k1), cg_b)
    ok(tenant(c) == ("pod", "socket", "team-a", "trainer", "a1", 5),
       "... and so is one whose cgroup says it is team-b/next: the socket decides", c)
    c = fc("s1cg", SOCK, cg_b)
    ok(tenant(c) and tenant(c)[2:4] == ("team-b", "next"),
       "(that cgroup on the shared socket is team-b/next: the fake cgroup works)", c)
    c = fc("s1", SOCK)
    ok(tenant(c) and tenant(c)[0] == "unknown",
       "the same client on the shared socket is an unknown tenant (contrast)", c)

    a2 = [GB + "__1", GA + "__2"]
    k2 = key_of(kl.allocate(a2, pod=("team-a", "two")))
    keys.append(k2)
    kl.prestart(list(reversed(a2)))
    ok(bound_to(k2, "team-a", "two") and scheduler_socket(k2),
       "two GPUs, PreStartContainer's IDs in another order than Allocate's: bound",
       binding(k2))

    # ---- the same devices, another Pod: a new key, the old one never moves ----
    kl.delete_pod("team-a", "trainer")
    k1b = key_of(kl.allocate(a1, pod=("team-b", "next")))
    keys.append(k1b)
    kl.prestart(a1)
    ok(k1b != k1 and bound_to(k1b, "team-b", "next") and scheduler_socket(k1b),
       "the same devices allocated to another Pod: a new key, bound to it", (k1, k1b))
    c = fc("p2", os.path.join(PODS, k1b))
    ok(tenant(c) == ("pod", "socket", "team-b", "next", "b1", 7),
       "... a client there is Pod team-b/next (7 %)", c)
    ok(binding(k1) in (None, {"namespace": "team-a", "name": "trainer",
                              "origin": "device-plugin"}),
       "... the old key is never bound to team-b/next", binding(k1))
    ok(wait_until(lambda: gone(k1), 10) and "its devices are another Pod's now" in log_text(plog)
       and wait_until(lambda: events("pod_socket_closed", k1), 5),
       "... it is removed at the next list (its devices are another Pod's): binding, "
       "directory, record; the scheduler closed its socket", log_text(plog)[-1500:])
    # The plugin removes the copy after the directory: waited for (a hang
    # guard), as the directory was; read at once it failed on a loaded run.
    ok(wait_until(lambda: not os.path.exists(os.path.join(STATE, k1 + ".json")), 10),
       "... and its copy")
    ok(tenant(client(CLIENTS["p1"].pid)) == ("pod", "socket", "team-a", "trainer", "a1", 5),
       "... the client connected before stays in team-a/trainer")

    # A kubelet (or a missed Allocate) that says another Pod holds a bound
    # key's devices: refused, never rebound.
    a9 = [GB + "__7"]
    k9 = key_of(kl.allocate(a9, pod=("team-a", "nine")))
    keys.append(k9)
    kl.prestart(a9)
    bound9 = bound_to(k9, "team-a", "nine")
    # The reconciliation stands still (its List held), so that only
    # PreStartContainer sees the theft.
    kl.hold_lists = True
    held = kl.wait(lambda: kl.held == 1, 10)
    kl.delete_pod("team-a", "nine")
    kl.assign(a9, ("team-x", "thief"))
    kl.prestart(a9)
    kl.release_lists()
    ok(held, "(the reconciliation's List held)")
    ok(bound9 and not bound_to(k9, "team-x", "thief")
       and record_pod(k9) in (("team-a", "nine"), None)
       and "is pod team-a/nine's: never bound to team-x/thief" in log_text(plog),
       "PodResources names another Pod for a bound key's devices, without an Allocate: "
       "PreStartContainer refuses to bind the key to it, loudly", binding(k9))
    ok(wait_until(lambda: gone(k9), 10) and not any(
        e.get("pod") == "thief" for e in events("pod_socket", k9)),
       "... the key is removed (its devices are another Pod's); the scheduler never "
       "opened it for team-x/thief")
    kl.delete_pod("team-x", "thief")

    # ---- reconciliation ----
    a3 = [GA + "__3"]
    k3 = key_of(kl.allocate(a3, pod=("team-c", "nopre")))
    keys.append(k3)
    ok(wait_until(lambda: bound_to(k3, "team-c", "nopre"), 10),
       "reconciliation writes the binding of an allocation PodResources lists (no "
       "PreStartContainer for it)", binding(k3))

    # An init container and an app container holding the same devices:
    # PodResources lists only the app container.
    a4 = [GB + "__4"]
    ki = key_of(kl.allocate(a4, pod=("team-d", "d1"), container="init", listed=False))
    km = key_of(kl.allocate(a4, pod=("team-d", "d1"), container="main"))
    keys += [ki, km]
    kl.prestart(a4)
    n0 = kl.podres_lists
    wait_until(lambda: kl.podres_lists >= n0 + STALE_LISTS + 2, 30)
    ok(bound_to(km, "team-d", "d1") and binding(ki) is None and linked_to_shared(ki)
       and record(ki) is not None,
       "init and app container with the same devices: the newest allocation (the app "
       "container's, the one PodResources lists) is bound; the init container's stays on "
       "the shared socket, kept while its devices are held (%d lists)"
       % (kl.podres_lists - n0), (binding(km), binding(ki)))

    # A binding another binder wrote (a DRA driver): never ours to remove.
    other = "00000000000000aa"
    os.makedirs(os.path.join(PODS, other))
    with open(os.path.join(BIND, "." + other + ".tmp"), "w") as f:
        json.dump({"namespace": "dra-ns", "name": "dra-pod", "origin": "dra"}, f)
    os.chmod(os.path.join(BIND, "." + other + ".tmp"), 0o600)
    os.rename(os.path.join(BIND, "." + other + ".tmp"), os.path.join(BIND, other + ".json"))
    other_from = kl.podres_lists

    n0 = kl.podres_lists
    kl.delete_pod("team-c", "nopre")
    kl.delete_pod("team-d", "d1")
    out = wait_until(lambda: gone(k3) and gone(ki) and gone(km), 30)
    seen = kl.podres_lists - n0
    ok(out and seen >= STALE_LISTS and "has not listed it for a while" in log_text(plog),
       "Pods gone (their devices free): their allocations, bound or not, removed after %d "
       "lists without them (%d lists were served)" % (STALE_LISTS, seen),
       log_text(plog)[-1500:])

    # ---- kubelet restart ----
    a5 = [GA + "__5", GB + "__5"]
    k5 = key_of(kl.allocate(a5, pod=("team-d", "d2")))
    keys.append(k5)
    kl.prestart(a5)
    live = [(k1b, "team-b", "next"), (k2, "team-a", "two"), (k5, "team-d", "d2")]
    kl.hide_pods = True  # as a kubelet that lists Pods before it knows them
    # Exactly 3 hidden lists before the restart and 8 after it: more than 10
    # in all, never 10 on either side. The budget holds further Lists (they
    # wait, or end with the kubelet): counting the Lists as they came let a
    # loaded run see 4 more around the restart before this script noticed
    # the re-registration, and the bindings were removed.
    with kl.cv:
        n0 = kl.podres_lists
        kl.list_budget = n0 + 3
    wait_until(lambda: kl.podres_lists >= n0 + 3, 20)
    nreg = len(kl.regs(GPU))
    kl.restart()
    # The plugin starts the count again when it sees the kubelet's new
    # socket, before it registers again.
    rereg = kl.wait(lambda: len(kl.regs(GPU)) > nreg, 10)
    with kl.cv:
        n1 = kl.podres_lists
        kl.list_budget = n1 + 8
        kl.cv.notify_all()
    wait_until(lambda: kl.podres_lists >= n1 + 8, 20)
    hidden = kl.podres_lists - n0
    intact = all(bound_to(k, ns, name) and scheduler_socket(k) for k, ns, name in live)
    with kl.cv:
        kl.list_budget = None
        kl.cv.notify_all()
    ok(rereg and intact,
       "kubelet restart: re-registered, and the %d allocations of running Pods stay bound "
       "through %d lists that showed no Pod (more than %d: the restart started the count "
       "again)" % (len(live), hidden, STALE_LISTS), [binding(k) for k, _, _ in live])
    kl.hide_pods = False
    a6 = [GB + "__6"]
    k6 = key_of(kl.allocate(a6, pod=("team-g", "after")))
    keys.append(k6)
    kl.prestart(a6)
    ok(bound_to(k6, "team-g", "after") and scheduler_socket(k6),
       "after the restart: Allocate and PreStartContainer bind through the new PodResources "
       "socket", binding(k6))

    # ---- the scheduler not running at PreStartContainer ----
    rc = stop(sched)
    a7 = [GA + "__7"]
    k7 = key_of(kl.allocate(a7, pod=("team-h", "early")))
    keys.append(k7)
    kl.prestart(a7)
    ok(rc == 0 and bound_to(k7, "team-h", "early") and ino(sock_of(k7)) is None
       and "has not opened its socket within" in log_text(plog),
       "scheduler down: PreStartContainer still binds, waits its bound, says so and lets "
       "the container start", log_text(plog)[-800:])
    sched, up = start_scheduler()
    ok(up and wait_until(lambda: scheduler_socket(k7), 10),
       "... the scheduler, once started, listens on that Pod's socket")

    # ---- PodResources missing: degraded, loudly, once ----
    warn = "Pod sockets are OFF"
    w0 = log_text(plog).count(warn)
    kl.stop_podres()
    a8 = [GA + "__8"]
    k8 = key_of(kl.allocate(a8, pod=("team-e", "e1")))
    keys.append(k8)
    kl.prestart(a8)
    kl.delete_pod("team-b", "next")
    k1c = key_of(kl.allocate(a1, pod=("team-f", "f1")))
    keys.append(k1c)
    kl.prestart(a1)
    ok(binding(k8) is None and linked_to_shared(k8) and binding(k1c) is None
       and linked_to_shared(k1c),
       "PodResources missing: PreStartContainer writes no binding; the containers' "
       "directories hold the shared socket", (binding(k8), ino(sock_of(k8)), ino(SHARED)))
    c = fc("e1", os.path.join(PODS, k8))
    ok(tenant(c) and tenant(c)[0] == "unknown" and tenant(c)[1] != "socket",
       "... a client there is identified as before, by its cgroup (none here: unknown)", c)
    ok(bound_to(k1b, "team-b", "next") and scheduler_socket(k1b),
       "... team-b/next's key keeps its binding: it is that Pod's for good, whoever holds "
       "the devices now", binding(k1b))
    ok(log_text(plog).count(warn) == w0 + 1,
       "the outage is logged as a warning once (two PreStartContainer calls, lists)",
       "%d lines" % (log_text(plog).count(warn) - w0))

    # The scheduler restarts: the links follow its new socket.
    old = ino(SHARED)
    rc = stop(sched)
    sched, up = start_scheduler()
    ok(rc == 0 and up and ino(SHARED) != old
       and wait_until(lambda: linked_to_shared(k8) and linked_to_shared(k1c), 10),
       "scheduler restarted (a new shared socket): the unbound allocations' links point at it",
       (ino(sock_of(k8)), ino(sock_of(k1c)), ino(SHARED)))

    kl.start_podres()
    back = wait_until(lambda: bound_to(k8, "team-e", "e1") and bound_to(k1c, "team-f", "f1")
                      and scheduler_socket(k8) and scheduler_socket(k1c) and gone(k1b), 10)
    ok(back and "PodResources answers again" in log_text(plog),
       "PodResources back: reconciliation binds them, the scheduler's Pod sockets replace the "
       "links; team-b/next's key is removed (its devices are team-f/f1's)",
       (binding(k8), binding(k1c), binding(k1b)))
    # The restarted scheduler's watch may not have listed the Pod when
    # the client connects: until it has, the most restrictive limits
    # apply (pod_identity.c), then the Pod's.
    c = fc("e2", os.path.join(PODS, k8))
    want = ("pod", "socket", "team-e", "e1", "e1", 9)
    ok(c and wait_until(lambda: tenant(client(c["pid"])) == want, 10),
       "... a new client there is Pod team-e/e1 (9 %)", c and client(c["pid"]))

    ok(kl.podres_lists - other_from > STALE_LISTS and binding(other) is not None
       and os.path.isdir(os.path.join(PODS, other)),
       "another binder's binding (origin dra) and directory are left alone (%d lists)"
       % (kl.podres_lists - other_from), binding(other))

    # ---- plugin restart after a reboot: the socket directory emptied ----
    live = [(k2, "team-a", "two"), (k5, "team-d", "d2"), (k6, "team-g", "after"),
            (k8, "team-e", "e1"), (k1c, "team-f", "f1")]
    seq_before = max(record(k)["seq"] for k, _, _ in live)
    rc = stop(plugin)
    for k, _, _ in live:
        os.unlink(os.path.join(BIND, k + ".json"))
    ok(rc == 0 and wait_until(lambda: all(ino(sock_of(k)) is None for k, _, _ in live), 10),
       "(the bindings removed while the plugin is down: the scheduler closed their sockets)")
    for k, _, _ in live:
        for n in os.listdir(os.path.join(PODS, k)):
            os.unlink(os.path.join(PODS, k, n))
        os.rmdir(os.path.join(PODS, k))
    plugin = start_plugin(kl, wait_s)
    back = wait_until(lambda: all(bound_to(k, ns, name) and scheduler_socket(k)
                                  and record_pod(k) == (ns, name) for k, ns, name in live), 15)
    ok(back and "directory restored from" in log_text(plog),
       "plugin restarted after the socket directory was emptied (a reboot): the directories "
       "the kubelet checkpointed are made again from --state-dir, and the running Pods' "
       "bindings restored", [binding(k) for k, _, _ in live])
    c = fc("r1", os.path.join(PODS, k2))
    ok(tenant(c) and tenant(c)[:4] == ("pod", "socket", "team-a", "two"),
       "... a client in a restored directory is its Pod", c)
    a10 = [GB + "__8"]
    k10 = key_of(kl.allocate(a10, pod=("team-a", "ten")))
    keys.append(k10)
    ok((record(k10) or {}).get("seq", 0) > seq_before,
       "... a new allocation's seq follows the restored ones", record(k10))
    ok(len(set(keys)) == len(keys), "every Allocate gave a key of its own (%d)" % len(keys),
       keys)
    return plugin, kl, sched


def refused_flags():
    bad = [["--pod-resources-interval", "50ms"], ["--pod-resources-interval", "2h"],
           ["--pod-socket-wait", "21s"], ["--pod-socket-wait", "soon"],
           ["--host-socket-dir", "/" + "d" * 100]]
    res = []
    for a in bad + [["--pod-resources-socket", "kubelet.sock"], ["--state-dir", "state"]]:
        r = subprocess.run([PLUGIN, "--kubelet-dir", os.path.join(T, "noflags")] + a,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=guard(10))
        if r.returncode != 2 or (a[0] not in r.stderr and "absolute" not in r.stderr):
            res.append((a, r.returncode, r.stderr[-200:]))
    ok(not res, "bad --pod-resources-* / --pod-socket-wait / --state-dir values, a "
       "--host-socket-dir too long for a socket address: exit 2 naming the problem",
       res)


def main():
    try:
        plugin, kl, sched = main_scenario()
        refused_flags()
        rc = stop(plugin)
        ok(rc == 0, "SIGTERM: the plugin exits 0", log_text(plugin.logpath)[-800:])
        kl.stop()
        stop(sched)
    finally:
        rc = done(procs)
    return rc


if __name__ == "__main__":
    sys.exit(main())
