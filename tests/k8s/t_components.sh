#!/usr/bin/env bash
# The optional kustomize components of deploy/kubernetes (issue 34, items
# 6 and 7), each rendered with the base in an overlay as docs/kubernetes.md
# shows: pull-secret (both DaemonSets name the secret), runtime-class
# (runtimeClassName nvidia on both), cdi (the device plugin's strategy
# variable switched to CDI, the node's /var/run/cdi mounted for its spec,
# nothing else changed). monitoring is tests/metrics/t_alerts.sh's.
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

render all cdi runtime-class pull-secret monitoring
check "all four components together render" [ -s "$T/all.json" ]
echo "1..$_tap_n"
