#!/usr/bin/env bash
# The optional monitoring component (issue 34, item 10;
# deploy/kubernetes/components/monitoring): rendered with the base by
# kustomize, its Service selects the scheduler Pods and their "metrics"
# port, the ServiceMonitor selects that Service and labels series with the
# node's name; the PrometheusRule's rules pass `promtool check rules` and
# `promtool test rules` (tests/metrics/alerts_test.yml: every alert fires
# on trouble and stays quiet on a healthy node); every metric an alert
# reads is one the scheduler exports and docs/metrics.md documents; every
# exported family is documented.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
for c in kubectl promtool python3; do
  command -v $c >/dev/null || { not_ok "$c not installed (scripts/install-deps.sh)"; echo "1..$_tap_n"; exit 0; }
done
O=$T/overlay
mkdir -p "$O"
cat >"$O/kustomization.yaml" <<YML
resources:
  - $(realpath --relative-to="$O" deploy/kubernetes)
components:
  - $(realpath --relative-to="$O" deploy/kubernetes/components/monitoring)
YML
check "kubectl kustomize: the base with the monitoring component renders" \
  bash -c "kubectl kustomize '$O' >'$T/all.yaml' 2>'$T/k.err'"
python3 - "$T/all.yaml" "$T/rules.yml" >"$T/checks" 2>&1 <<'PY'
import sys, yaml
objs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = {}
for o in objs:
    by.setdefault(o["kind"], []).append(o)
def say(ok, what):
    print(("ok " if ok else "not ok ") + what)
ds = [d for d in by.get("DaemonSet", []) if d["metadata"]["name"] == "nvshare-scheduler"][0]
svc = by.get("Service", [None])[0]
sm = by.get("ServiceMonitor", [None])[0]
pr = by.get("PrometheusRule", [None])[0]
say(svc and sm and pr, "Service, ServiceMonitor and PrometheusRule rendered")
ns = ds["metadata"]["namespace"]
say(all(o["metadata"].get("namespace") == ns for o in (svc, sm, pr)), "all three in the scheduler's namespace " + ns)
podlabels = ds["spec"]["template"]["metadata"]["labels"]
say(all(podlabels.get(k) == v for k, v in svc["spec"]["selector"].items()), "the Service selects the scheduler Pods")
ports = [p for c in ds["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])]
mp = [p for p in ports if p.get("name") == svc["spec"]["ports"][0]["targetPort"]]
say(mp and mp[0]["containerPort"] == svc["spec"]["ports"][0]["port"] == 9402, "its port is the container's metrics port 9402")
say(svc["spec"].get("clusterIP") == "None", "headless (one endpoint per node's scheduler)")
sl = svc["metadata"]["labels"]
say(all(sl.get(k) == v for k, v in sm["spec"]["selector"]["matchLabels"].items()), "the ServiceMonitor selects the Service")
ep = sm["spec"]["endpoints"][0]
say(ep["port"] == svc["spec"]["ports"][0]["name"], "... on its named port")
rl = ep.get("relabelings", [])
say(any(r.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"] and r.get("targetLabel") == "node" for r in rl),
    "series get the node's name as label node (the dashboard's selector)")
say(any(r.get("targetLabel") == "job" and r.get("replacement") == "nvshare-scheduler" for r in rl),
    "job is nvshare-scheduler (what the alerts use)")
yaml.safe_dump({"groups": pr["spec"]["groups"]}, open(sys.argv[2], "w"), sort_keys=False)
# For promtool test rules: the same rules without annotations (the tests
# judge when and with which labels each alert fires; promtool check rules
# checks the annotations' templates on the real file).
import copy
g = copy.deepcopy(pr["spec"]["groups"])
for grp in g:
    for r in grp["rules"]:
        r.pop("annotations", None)
yaml.safe_dump({"groups": g}, open(sys.argv[2].replace("rules.yml", "rules-bare.yml"), "w"), sort_keys=False)
names = [r["alert"] for g in pr["spec"]["groups"] for r in g["rules"]]
print("# alerts: " + " ".join(names))
PY
while IFS= read -r l; do
  case "$l" in "ok "*) ok "${l#ok }";; "not ok "*) not_ok "${l#not ok }";; *) echo "$l";; esac
done <"$T/checks"
check "promtool check rules" bash -c "promtool check rules '$T/rules.yml' >'$T/check.log' 2>&1" ||
  sed 's/^/# /' "$T/check.log"
sed 's/^  - rules.yml$/  - rules-bare.yml/' tests/metrics/alerts_test.yml >"$T/alerts_test.yml"
if (cd "$T" && promtool test rules alerts_test.yml) >"$T/test.log" 2>&1; then
  ok "promtool test rules: every alert fires on trouble, none on a healthy node"
else
  not_ok "promtool test rules"; sed 's/^/# /' "$T/test.log" | head -40
fi
for a in NvshareSchedulerDown NvshareUnmanagedGPUProcesses NvshareClientsUngated NvshareSchedulerLoopStalls; do
  check "alert $a exists and is tested" bash -c "grep -q 'alert: $a' '$T/rules.yml' && grep -q 'alertname: $a' tests/metrics/alerts_test.yml"
done

# The metrics the alerts read exist (exported by the scheduler: rows of
# its table of families, scheduler/metrics.def; documented).
grep -o 'nvshare_[a-z_]*' "$T/rules.yml" | sort -u >"$T/used"
grep -ho '^NVS_METRIC("nvshare_[a-z_]*"' scheduler/metrics.def | cut -d'"' -f2 | sort -u >"$T/exported"
check "every metric an alert reads is exported: $(tr '\n' ' ' <"$T/used")" \
  bash -c "[ -z \"\$(comm -23 '$T/used' '$T/exported')\" ]"
# Every family the scheduler exports is in docs/metrics.md (histogram parts
# are documented with their family).
miss=$(while read -r f; do
  case "$f" in *_sum|*_count|*_bucket) continue;; esac
  grep -qE "\`$f(\`|\{)" docs/metrics.md || echo "$f"
done <"$T/exported")
check "every exported family is documented in docs/metrics.md${miss:+ (missing: $(echo $miss))}" [ -z "$miss" ]
check "the dashboard selects nodes by the node label, not instance (the Pod IP)" \
  bash -c "! grep -q 'instance' deploy/grafana-dashboard.json && grep -q 'label_values(nvshare_scheduler_gpus, node)' deploy/grafana-dashboard.json"
echo "1..$_tap_n"
