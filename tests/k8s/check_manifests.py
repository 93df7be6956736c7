"""nvshare-specific checks of the rendered manifests (t_manifests.sh).

    check_manifests.py DEPLOY.json EXAMPLES.json DEPLOY_DIR

The JSON files hold [{"source", "object"}] as made by t_manifests.sh. Prints
one "OK <check>" or "ERR <check>: <why>" line per check; exit 1 on any ERR.
"""

import glob
import json
import os
import re
import sys

import yaml

NS = "nvshare-system"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
failed = 0


def check(name, cond, why=""):
    global failed
    if cond:
        print("OK " + name)
    else:
        failed += 1
        print("ERR %s: %s" % (name, why))


def load(path):
    with open(path) as f:
        return [x["object"] for x in json.load(f)]


def find(objs, kind, name):
    for o in objs:
        if o.get("kind") == kind and o["metadata"].get("name") == name:
            return o
    return None


def pod_spec(o):
    return o["spec"]["template"]["spec"]


def container(spec, name):
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c["name"] == name:
            return c
    return None


def env_of(c):
    return {e["name"]: e for e in c.get("env", [])}


def volumes(spec):
    return {v["name"]: v for v in spec.get("volumes", [])}


def args_of(c):
    out = {}
    for a in c.get("args", []):
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            out[k] = v
    return out


def size_bytes(v):
    """A size as the plugin's --memory-unit and NVSHARE_GPU_MEMORY_UNIT take
    it (bare = bytes; K/M/G/T and Ki/Mi/Gi/Ti are powers of 1024)."""
    m = re.fullmatch(r"([0-9]+)\s*([KMGT]?)(i?B?)", str(v or ""), re.I)
    if not m:
        return None
    return int(m.group(1)) << (10 * "_KMGT".index(m.group(2).upper() or "_"))


def main():
    deploy, examples, deploy_dir = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]

    # Every manifest file is part of the kustomization.
    with open(os.path.join(deploy_dir, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    files = {os.path.basename(p) for p in glob.glob(os.path.join(deploy_dir, "*.yaml"))}
    files.discard("kustomization.yaml")
    check("every deploy/kubernetes/*.yaml is listed in kustomization.yaml",
          files == set(kust["resources"]), sorted(files ^ set(kust["resources"])))

    wrong_ns = ["%s/%s" % (o["kind"], o["metadata"]["name"]) for o in deploy
                if o["kind"] not in CLUSTER_SCOPED and o["metadata"].get("namespace") != NS]
    check("namespaced objects are in " + NS, not wrong_ns, wrong_ns)
    check("Namespace %s exists" % NS, find(deploy, "Namespace", NS) is not None)

    # The admin socket directory lives only in the scheduler Pod.
    others = ["%s/%s" % (o["kind"], o["metadata"]["name"]) for o in deploy + examples
              if "nvshare-admin" in json.dumps(o)
              and not (o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvshare-scheduler")]
    check("no object but the scheduler DaemonSet names the admin directory", not others, others)
    # The test hook that points identity at fake cgroup files is never shipped.
    hook = ["%s/%s" % (o["kind"], o["metadata"]["name"]) for o in deploy + examples
            if "NVSHARE_PROC_ROOT" in json.dumps(o) or "proc-root" in json.dumps(o)]
    check("no object sets NVSHARE_PROC_ROOT or --proc-root (docs/security.md)", not hook, hook)

    # Priority classes outside kube-system need a covering quota.
    classes = set()
    for q in deploy:
        if q["kind"] == "ResourceQuota":
            for e in q["spec"].get("scopeSelector", {}).get("matchExpressions", []):
                if e.get("scopeName") == "PriorityClass" and e.get("operator") == "In":
                    classes |= set(e.get("values", []))
    used = {pod_spec(o).get("priorityClassName") for o in deploy if o["kind"] == "DaemonSet"}
    used.discard(None)
    check("a ResourceQuota admits system-node-critical and system-cluster-critical",
          {"system-node-critical", "system-cluster-critical"} <= classes, classes)
    check("every priority class used is covered by the quota", used <= classes, used - classes)

    # RBAC: least privilege.
    role = find(deploy, "ClusterRole", "nvshare-scheduler")
    rules = role and role.get("rules")
    check("ClusterRole nvshare-scheduler: get/list/watch on pods only",
          rules is not None and len(rules) == 1 and rules[0].get("apiGroups") == [""]
          and rules[0].get("resources") == ["pods"]
          and sorted(rules[0].get("verbs", [])) == ["get", "list", "watch"]
          and not rules[0].get("resourceNames"), rules)
    kinds = {o["kind"] for o in deploy}
    check("no Role/ClusterRole other than the scheduler's",
          [o["metadata"]["name"] for o in deploy if o["kind"] in ("Role", "ClusterRole")]
          == ["nvshare-scheduler"], kinds)
    b = find(deploy, "ClusterRoleBinding", "nvshare-scheduler")
    check("ClusterRoleBinding binds the scheduler's ServiceAccount",
          b is not None and b["roleRef"]["name"] == "nvshare-scheduler"
          and b["subjects"] == [{"kind": "ServiceAccount", "name": "nvshare-scheduler",
                                 "namespace": NS}]
          and find(deploy, "ServiceAccount", "nvshare-scheduler") is not None, b)

    # Scheduler DaemonSet.
    s = find(deploy, "DaemonSet", "nvshare-scheduler")
    sched_unit = None
    sched_sock = None  # the scheduler's socket directory, as a hostPath
    check("scheduler DaemonSet exists", s is not None)
    if s:
        sp = pod_spec(s)
        c = container(sp, "scheduler")
        env = env_of(c)
        vols = volumes(sp)
        sock = [v for v in vols.values()
                if v.get("hostPath", {}).get("path") == "/var/run/nvshare"]
        mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
        check("scheduler: hostPID", sp.get("hostPID") is True)
        check("scheduler: ServiceAccount nvshare-scheduler",
              sp.get("serviceAccountName") == "nvshare-scheduler")
        check("scheduler: /var/run/nvshare hostPath DirectoryOrCreate, mounted as a directory",
              len(sock) == 1 and sock[0]["hostPath"].get("type") == "DirectoryOrCreate"
              and mounts.get(sock[0]["name"], {}).get("mountPath") == "/var/run/nvshare", sock)
        if len(sock) == 1 and env.get("NVSHARE_SOCK_DIR", {}).get("value") == \
                mounts.get(sock[0]["name"], {}).get("mountPath"):
            sched_sock = sock[0]["hostPath"]["path"]
        adm = [n for n, v in vols.items() if "emptyDir" in v
               and mounts.get(n, {}).get("mountPath") == "/var/run/nvshare-admin"]
        check("scheduler: admin socket directory /var/run/nvshare-admin is a Pod-local emptyDir",
              len(adm) == 1 and env.get("NVSHARE_ADMIN_SOCK_DIR", {}).get("value")
              == "/var/run/nvshare-admin", adm)
        ports = c.get("ports", [])
        check("scheduler: port 9402 named metrics",
              any(p.get("name") == "metrics" and p.get("containerPort") == 9402
                  for p in ports), ports)
        for kind in ("livenessProbe", "readinessProbe"):
            pr = c.get(kind, {})
            check("scheduler: %s is GET /healthz on the metrics port (the loop's heartbeat)"
                  % kind, pr.get("httpGet", {}).get("path") == "/healthz"
                  and pr["httpGet"].get("port") == "metrics"
                  and env.get("NVSHARE_METRICS_ENABLE", {}).get("value") == "1", pr)
        sf = env.get("NVSHARE_STATE_FILE", {}).get("value", "")
        st = [n for n, v in vols.items() if "hostPath" in v
              and sf.startswith(mounts.get(n, {}).get("mountPath", "//") + "/")]
        check("scheduler: the state file is on a hostPath volume (survives the Pod)",
              len(st) == 1, sf)
        check("scheduler: NODE_NAME from spec.nodeName",
              env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {})
              .get("fieldPath") == "spec.nodeName", env.get("NODE_NAME"))
        check("scheduler: NVSHARE_METRICS_ENABLE=1",
              env.get("NVSHARE_METRICS_ENABLE", {}).get("value") == "1")
        # The exporter's default is 127.0.0.1: the Pod IP must be explicit.
        check("scheduler: NVSHARE_METRICS_ADDR from status.podIP",
              env.get("NVSHARE_METRICS_ADDR", {}).get("valueFrom", {}).get("fieldRef", {})
              .get("fieldPath") == "status.podIP", env.get("NVSHARE_METRICS_ADDR"))
        sched_unit = size_bytes(env.get("NVSHARE_GPU_MEMORY_UNIT", {}).get("value", "1Gi"))

    # Only the monitoring namespace may scrape (tenants must not read the
    # metrics): a NetworkPolicy on the scheduler Pods, port 9402 only.
    np = find(deploy, "NetworkPolicy", "nvshare-scheduler-metrics")
    check("NetworkPolicy nvshare-scheduler-metrics exists", np is not None)
    if np:
        nps = np["spec"]
        ing = nps.get("ingress", [])
        check("NetworkPolicy: selects the scheduler Pods, Ingress",
              nps.get("podSelector", {}).get("matchLabels") ==
              {"app.kubernetes.io/name": "nvshare-scheduler"} and
              nps.get("policyTypes") == ["Ingress"], nps.get("podSelector"))
        check("NetworkPolicy: one rule, from a namespace selector only, to TCP 9402 only",
              len(ing) == 1 and
              all(list(f) == ["namespaceSelector"] for f in ing[0].get("from", [])) and
              len(ing[0].get("from", [])) >= 1 and
              ing[0].get("ports") == [{"protocol": "TCP", "port": 9402}], ing)

    # Device-plugin DaemonSet.
    d = find(deploy, "DaemonSet", "nvshare-device-plugin")
    check("device-plugin DaemonSet exists", d is not None)
    if d:
        sp = pod_spec(d)
        c = container(sp, "device-plugin")
        vols = volumes(sp)
        mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
        a = args_of(c)
        dp = [v for v in vols.values()
              if v.get("hostPath", {}).get("path") == "/var/lib/kubelet/device-plugins"]
        check("device plugin: /var/lib/kubelet/device-plugins mounted as a directory",
              len(dp) == 1 and dp[0]["hostPath"].get("type") == "Directory"
              and mounts.get(dp[0]["name"], {}).get("mountPath")
              == "/var/lib/kubelet/device-plugins"
              and a.get("kubelet-dir") == "/var/lib/kubelet/device-plugins", dp)
        hf = a.get("health-file", "")
        hv = [n for n, v in vols.items() if "emptyDir" in v
              and hf.startswith(mounts.get(n, {}).get("mountPath", "//") + "/")]
        check("device plugin: --health-file on a Pod-local emptyDir", len(hv) == 1, hf)
        for kind, what in (("livenessProbe", "live"), ("readinessProbe", "ready")):
            cmd = c.get(kind, {}).get("exec", {}).get("command", [])
            check("device plugin: %s runs --probe=%s on the same health file" % (kind, what),
                  cmd[:1] == ["/usr/local/bin/nvshare-device-plugin"]
                  and "--probe=" + what in cmd and "--health-file=" + hf in cmd, cmd)
        socks = [v["hostPath"]["path"] for v in vols.values()
                 if v.get("hostPath", {}).get("path", "").endswith(".sock")]
        check("no hostPath volume names a socket file", not socks, socks)
        check("device plugin: mounts the client socket directory, never the admin one",
              a.get("host-socket-dir") == "/var/run/nvshare"
              and not any("nvshare-admin" in json.dumps(v) for v in vols.values()),
              a.get("host-socket-dir"))
        # Pod sockets (docs/security.md): the plugin writes bindings and
        # per-allocation directories into the scheduler's own directory.
        sd = [n for n, v in vols.items()
              if v.get("hostPath", {}).get("path") == a.get("host-socket-dir")]
        check("device plugin: --host-socket-dir is the scheduler's hostPath, mounted writable "
              "at the same path (bindings, pods/<key>)",
              len(sd) == 1 and s is not None and sched_sock == a.get("host-socket-dir")
              and mounts.get(sd[0], {}).get("mountPath") == a.get("host-socket-dir")
              and not mounts.get(sd[0], {}).get("readOnly"), (sd, sched_sock))
        pr = a.get("pod-resources-socket", "")
        prv = [n for n, v in vols.items()
               if v.get("hostPath", {}).get("path") == "/var/lib/kubelet/pod-resources"]
        check("device plugin: /var/lib/kubelet/pod-resources (a Directory, read-only) holds "
              "--pod-resources-socket",
              len(prv) == 1 and vols[prv[0]]["hostPath"].get("type") == "Directory"
              and mounts.get(prv[0], {}).get("readOnly") is True
              and pr == mounts.get(prv[0], {}).get("mountPath", "//") + "/kubelet.sock",
              (prv, pr))
        # The records' copies must outlive a reboot (the socket directory's
        # tmpfs does not): a hostPath on the node's disk, writable, at the
        # same path, never the library directory containers mount.
        st = a.get("state-dir", "")
        stv = [n for n, v in vols.items()
               if v.get("hostPath", {}).get("path") == st and st.startswith("/var/lib/")]
        check("device plugin: --state-dir is a hostPath under /var/lib, mounted writable at "
              "the same path, not the library directory",
              len(stv) == 1 and mounts.get(stv[0], {}).get("mountPath") == st
              and not mounts.get(stv[0], {}).get("readOnly")
              and st != a.get("host-lib-dir") and not st.startswith(a.get("host-lib-dir", "//") + "/"),
              (stv, st))
        lib = a.get("host-lib-dir")
        libvol = [n for n, v in vols.items() if v.get("hostPath", {}).get("path") == lib]
        init = [ic for ic in sp.get("initContainers", [])
                if any(m["name"] in libvol for m in ic.get("volumeMounts", []))]
        check("device plugin: an init container installs the library into --host-lib-dir",
              lib and libvol and init
              and not any(m.get("readOnly") for ic in init for m in ic["volumeMounts"]
                          if m["name"] in libvol), (lib, libvol))
        check("device plugin: sees the library dir at the same path (Allocate's check)",
              libvol and mounts.get(libvol[0], {}).get("mountPath") == lib)
        check("device plugin: no API token", sp.get("automountServiceAccountToken") is False)
        check("device plugin: resource nvshare.com/gpu",
              a.get("resource-name", "nvshare.com/gpu") == "nvshare.com/gpu")
        # A Pod's units x the scheduler's unit is its limit: a different
        # unit in the plugin would give Pods other limits than they asked.
        dp_unit = size_bytes(a.get("memory-unit", "1Gi"))
        check("nvshare.com/gpu-memory: plugin --memory-unit == scheduler "
              "NVSHARE_GPU_MEMORY_UNIT",
              "no-memory-resource" in c.get("args", []) or
              (s is not None and dp_unit is not None and dp_unit == sched_unit),
              (a.get("memory-unit"), s and sched_unit))

    # Images: every container pinned to a tag.
    untagged = []
    for o in deploy:
        if o["kind"] == "DaemonSet":
            sp = pod_spec(o)
            for c in sp.get("containers", []) + sp.get("initContainers", []):
                img = c["image"]
                if ":" not in img.rsplit("/", 1)[-1] or img.endswith(":latest"):
                    untagged.append(img)
    check("images carry a version tag", not untagged, untagged)
    # No default image from a registry namespace the project does not own
    # (issue 34): the base names localhost/nvshare/*, which the user
    # builds (make images) and points at their registry (make
    # deploy-images); a bare nvshare/x would be pulled from docker.io.
    imgs = sorted({c["image"] for o in deploy if o["kind"] == "DaemonSet"
                   for c in pod_spec(o).get("containers", []) + pod_spec(o).get("initContainers", [])})
    check("default images are local names (localhost/nvshare/*), from no public registry",
          imgs and all(i.startswith("localhost/nvshare/") for i in imgs), imgs)

    # Examples.
    jobs = [o for o in examples if o["kind"] == "Job"]
    bad, mem = [], []
    for j in jobs:
        for c in pod_spec(j)["containers"]:
            lim = c.get("resources", {}).get("limits", {})
            gpu, units = lim.get("nvshare.com/gpu"), lim.get("nvshare.com/gpu-memory")
            # One or the other: both in one container may get two GPUs.
            if (gpu is None) == (units is None) or (gpu is not None and str(gpu) != "1") \
                    or (units is not None and not re.fullmatch(r"[1-9][0-9]*", str(units))):
                bad.append(j["metadata"]["name"])
            if units is not None:
                mem.append(j["metadata"]["name"])
    check("examples: %d Jobs, each requesting nvshare.com/gpu: 1 or whole units of "
          "nvshare.com/gpu-memory, never both" % len(jobs),
          len(jobs) >= 4 and not bad, bad)
    check("examples: one asks for nvshare.com/gpu-memory", len(mem) >= 1, mem)
    ann = [j["spec"]["template"]["metadata"].get("annotations", {}) for j in jobs]
    limited = [a for a in ann if "nvshare.com/gpu-core-limit" in a
               or "nvshare.com/gpu-memory-limit" in a]
    check("examples: with and without nvshare.com/gpu-* annotations",
          limited and len(limited) < len(ann))
    badvals = [a for a in limited
               if not re.fullmatch(r"([1-9][0-9]?|100)%?", a.get("nvshare.com/gpu-core-limit", "50"))
               or not re.fullmatch(r"[0-9]+(\.[0-9]+)?\s*([KMGT]i?B?)?",
                                   a.get("nvshare.com/gpu-memory-limit", "1Gi"), re.I)]
    check("examples: annotation values are a percentage and a size", not badvals, badvals)
    names = [j["metadata"]["name"] for j in jobs]
    check("examples: add and matmul, each with a small variant",
          all(any(n.endswith(x) for n in names)
              for x in ("pytorch-add", "pytorch-add-small", "pytorch-matmul",
                        "pytorch-matmul-small")), names)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
