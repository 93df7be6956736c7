#!/usr/bin/env bash
# The optional kustomize components of deploy/kubernetes (issue 34, items
# 6 and 7), each rendered with the base in an overlay as docs/kubernetes.md
# shows: pull-secret (both DaemonSets name the secret), runtime-class
# (runtimeClassName nvidia on both), cdi (the device plugin's strategy
# variable switched to CDI, the node's /var/run/cdi mounted for its spec,
# nothing else changed), dra (the DRA driver instead of the device plugin:
# its DaemonSet, RBAC scoped to claims and slices, the DeviceClass; with
# examples/dra, schema-checked like t_manifests.sh). monitoring is
# tests/metrics/t_alerts.sh's.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
command -v kubectl >/dev/null || { not_ok "kubectl not installed (scripts/install-deps.sh)"; echo "1..$_tap_n"; exit 0; }

# render NAME COMPONENT...: the base with those components, as JSON lines
# (one object per line) in $T/NAME.json.
render() {
  local n=$1; shift
  mkdir -p "$T/$n"
  {
    echo "resources:"
    echo "  - $(realpath --relative-to="$T/$n" deploy/kubernetes)"
    echo "components:"
    local c
    for c in "$@"; do echo "  - $(realpath --relative-to="$T/$n" "deploy/kubernetes/components/$c")"; done
  } >"$T/$n/kustomization.yaml"
  kubectl kustomize "$T/$n" 2>"$T/$n.err" |
    /usr/bin/python3 -c 'import json, sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d: print(json.dumps(d))' >"$T/$n.json"
}
# q NAME PYTHON-EXPR: evaluates EXPR with ds(name) (a DaemonSet's pod spec)
# over the rendered objects of NAME; exit 0 if true.
q() {
  /usr/bin/python3 - "$T/$1.json" "$2" <<'PY'
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
def ds(name):
    return [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == name][0]["spec"]["template"]["spec"]
def env(name, c=0):
    return {e["name"]: e.get("value") for e in ds(name)["containers"][c].get("env", [])}
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
S=nvshare-scheduler D=nvshare-device-plugin

render base
check "the base: envvar strategy, no runtimeClassName, no pull secret" \
  q base "env('$D')['NVSHARE_DEVICE_LIST_STRATEGY'] == 'envvar' and all('runtimeClassName' not in ds(n) and 'imagePullSecrets' not in ds(n) for n in ('$S', '$D'))"

render ps pull-secret
check "pull-secret: both DaemonSets name nvshare-registry" \
  q ps "all(ds(n).get('imagePullSecrets') == [{'name': 'nvshare-registry'}] for n in ('$S', '$D'))"

render rc runtime-class
check "runtime-class: both DaemonSets run with runtimeClassName nvidia" \
  q rc "all(ds(n).get('runtimeClassName') == 'nvidia' for n in ('$S', '$D'))"

render cdi cdi
check "cdi: the device plugin's strategy is cdi-annotations,cdi-cri (one variable)" \
  q cdi "env('$D')['NVSHARE_DEVICE_LIST_STRATEGY'] == 'cdi-annotations,cdi-cri' and [e['name'] for e in ds('$D')['containers'][0]['env']].count('NVSHARE_DEVICE_LIST_STRATEGY') == 1"
check "cdi: NVML's variables kept (the plugin still sees every GPU)" \
  q cdi "env('$D')['NVIDIA_VISIBLE_DEVICES'] == 'all' and env('$D')['NVIDIA_DRIVER_CAPABILITIES'] == 'utility'"
check "cdi: the node's /var/run/cdi mounted where the plugin writes its spec (its default --cdi-spec-dir)" \
  q cdi "any(m['mountPath'] == '/var/run/cdi' and m['name'] == 'cdi-specs' for m in ds('$D')['containers'][0]['volumeMounts']) and any(v['name'] == 'cdi-specs' and v['hostPath']['path'] == '/var/run/cdi' for v in ds('$D')['volumes'])"
check "cdi: the strategy names only values the plugin accepts" \
  bash -c "[ -x '$B/nvshare-device-plugin' ] || exit 0; NVSHARE_DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri '$B/nvshare-device-plugin' --probe live 2>&1 | grep -q 'needs --health-file'"

# dra: the DRA driver (docs/dra.md) instead of the device plugin.
R=nvshare-dra-plugin
render dra dra
check "dra: the device plugin's DaemonSet and ServiceAccount removed, the driver's DaemonSet in nvshare-system" \
  q dra "not [o for o in objs if o['metadata']['name'] == '$D'] and [o for o in objs if o['kind'] == 'DaemonSet' and o['metadata']['name'] == '$R' and o['metadata']['namespace'] == 'nvshare-system']"
check "dra: ClusterRole $R: get resourceclaims; get, list, create, update, delete resourceslices (resource.k8s.io); nothing else" \
  q dra "[o['rules'] for o in objs if o['kind'] == 'ClusterRole' and o['metadata']['name'] == '$R'] == [[{'apiGroups': ['resource.k8s.io'], 'resources': ['resourceclaims'], 'verbs': ['get']}, {'apiGroups': ['resource.k8s.io'], 'resources': ['resourceslices'], 'verbs': ['get', 'list', 'create', 'update', 'delete']}]]"
check "dra: its images are the base's, names and tags (the device plugin's image runs it; make deploy-images applies)" \
  q dra "(lambda im, base: im == base['nvshare-device-plugin'][0] and [i['image'] for i in ds('$R')['initContainers']] == base['nvshare-device-plugin'][1])([c['image'] for c in ds('$R')['containers']], {o['metadata']['name']: ([c['image'] for c in o['spec']['template']['spec']['containers']], [c['image'] for c in o['spec']['template']['spec'].get('initContainers', [])]) for o in map(json.loads, open('$T/base.json')) if o['kind'] == 'DaemonSet'}) and ds('$R')['containers'][0]['command'] == ['/usr/local/bin/$R']"
check "dra: bound to its own ServiceAccount only, which the DaemonSet uses" \
  q dra "[(o['roleRef']['name'], o['subjects']) for o in objs if o['kind'] == 'ClusterRoleBinding' and o['metadata']['name'] == '$R'] == [('$R', [{'kind': 'ServiceAccount', 'name': '$R', 'namespace': 'nvshare-system'}])] and ds('$R')['serviceAccountName'] == '$R'"
# The kubelet's directories as hostPath directories mounted at the paths
# the flags name (never socket files), the socket directory writable
# (bindings), the library installed by an init container.
check "dra: plugin registry, plugin dir, CDI specs, socket and library dirs mounted where --registry-dir, --plugin-dir, --cdi-spec-dir, --host-socket-dir, --host-lib-dir say" \
  q dra "(lambda sp, a: all(any(m['mountPath'] == a[f] and [v for v in sp['volumes'] if v['name'] == m['name'] and v.get('hostPath', {}).get('path') == a[f]] for m in sp['containers'][0]['volumeMounts']) for f in ('registry-dir', 'plugin-dir', 'cdi-spec-dir', 'host-socket-dir', 'host-lib-dir')) and not any(v.get('hostPath', {}).get('path', '').endswith('.sock') for v in sp['volumes']) and not [m for m in sp['containers'][0]['volumeMounts'] if m['mountPath'] == a['host-socket-dir'] and m.get('readOnly')] and any(m['mountPath'].endswith(a['host-lib-dir']) for ic in sp['initContainers'] for m in ic['volumeMounts']))(ds('$R'), dict(x[2:].split('=', 1) for x in ds('$R')['containers'][0]['args']))"
check "dra: probes run --probe=live / --probe=ready on its --health-file, in a Pod-local emptyDir" \
  q dra "(lambda c, sp: (lambda hf: all(c[k]['exec']['command'] == ['/usr/local/bin/$R', '--health-file=' + hf, '--probe=' + w] for k, w in (('livenessProbe', 'live'), ('readinessProbe', 'ready'))) and [v for v in sp['volumes'] if 'emptyDir' in v and any(m['name'] == v['name'] and hf.startswith(m['mountPath'] + '/') for m in c['volumeMounts'])])([x for x in c['args'] if x.startswith('--health-file=')][0].split('=', 1)[1]))(ds('$R')['containers'][0], ds('$R'))"
check "dra: NODE_NAME from spec.nodeName; the DeviceClass selects the --driver-name" \
  q dra "ds('$R')['containers'][0]['env'][0] == {'name': 'NODE_NAME', 'valueFrom': {'fieldRef': {'fieldPath': 'spec.nodeName'}}} and [o['spec']['selectors'] for o in objs if o['kind'] == 'DeviceClass'] == [[{'cel': {'expression': 'device.driver == \"%s\"' % [x for x in ds('$R')['containers'][0]['args'] if x.startswith('--driver-name=')][0].split('=', 1)[1]}}]]"
check "dra: every flag in the DaemonSet is one nvshare-dra-plugin --help lists" \
  bash -c "[ -x '$B/$R' ] || exit 0; h=\$('$B/$R' --help); for f in \$(/usr/bin/python3 -c 'import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o[\"kind\"] == \"DaemonSet\" and o[\"metadata\"][\"name\"] == \"$R\":
        print(\" \".join(a.split(\"=\")[0] for a in o[\"spec\"][\"template\"][\"spec\"][\"containers\"][0][\"args\"]))' '$T/dra.json'); do grep -q -- \"\$f \" <<<\"\$h\" || { echo \"# \$f unknown\"; exit 1; }; done"
kubectl kustomize deploy/kubernetes/examples/dra 2>"$T/exdra.err" |
  /usr/bin/python3 -c 'import json, sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d: print(json.dumps(d))' >"$T/exdra.json"
check "examples/dra: claim templates of 10Gi + 30 % and of a whole GPU (no capacity: the defaults), of class gpu.nvshare.com; each Job names one of them" \
  q exdra "(lambda t: t == {'nvshare-gpu-10gi-30pct': {'memory': '10Gi', 'cores': '30'}, 'nvshare-gpu-whole': None} and all(c['resourceClaimTemplateName'] in t for o in objs if o['kind'] == 'Job' for c in o['spec']['template']['spec']['resourceClaims']) and len([o for o in objs if o['kind'] == 'Job']) == 2)({o['metadata']['name']: o['spec']['spec']['devices']['requests'][0]['exactly'].get('capacity', {}).get('requests') for o in objs if o['kind'] == 'ResourceClaimTemplate' and o['spec']['spec']['devices']['requests'][0]['exactly']['deviceClassName'] == 'gpu.nvshare.com'})"
# Schemas (resource.k8s.io/v1 included) as t_manifests.sh checks the base.
# install.sh waits for an install running in t_manifests.sh (or does it).
if tests/k8s/tools/install.sh 2>"$T/npm.log"; then
  for n in dra exdra; do
    /usr/bin/python3 -c 'import json, sys
print(json.dumps([{"source": sys.argv[2], "object": json.loads(l)} for l in open(sys.argv[1])]))' "$T/$n.json" "$n" >"$T/$n.val.json"
  done
  if node tests/k8s/tools/validate.mjs "$T/dra.val.json" "$T/exdra.val.json" >"$T/dra.val" 2>&1 && [ "$(grep -c '^OK' "$T/dra.val")" -ge 14 ]; then
    ok "dra: every object rendered with the component and in examples/dra passes its schema ($(grep -c '^OK' "$T/dra.val") objects, strict fields)"
  else
    not_ok "dra: schemas"; sed 's/^/# /' "$T/dra.val"
  fi
else
  ok "dra: schemas # SKIP tests/k8s/tools/node_modules not installed: $(tail -1 "$T/npm.log")"
fi

render all dra cdi runtime-class pull-secret monitoring
check "all five components together render" [ -s "$T/all.json" ]
check "all: pull-secret and runtime-class reach the DRA driver's DaemonSet too (dra listed first)" \
  q all "ds('$R').get('imagePullSecrets') == [{'name': 'nvshare-registry'}] and ds('$R').get('runtimeClassName') == 'nvidia'"
echo "1..$_tap_n"
