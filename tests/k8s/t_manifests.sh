#!/usr/bin/env bash
# deploy/kubernetes: yamllint, kustomize rendering (kubectl kustomize),
# schema validation of every rendered object with the npm package
# kubernetes-models plus a strict unknown-field walk (tools/validate.mjs),
# and nvshare-specific checks (check_manifests.py). Offline once
# tests/k8s/tools/node_modules is installed (npm ci, done here if missing).
# Needs: yamllint, kubectl (Debian: kubernetes-client), node + npm,
# python3-yaml.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
K8S=$NVS_ROOT/tests/k8s
DEPLOY=$NVS_ROOT/deploy/kubernetes

# 1. yamllint
if command -v yamllint >/dev/null; then
  if out=$(yamllint -s -c "$NVS_ROOT/deploy/.yamllint.yaml" "$NVS_ROOT/deploy" 2>&1); then
    ok "yamllint deploy/"
  else
    not_ok "yamllint deploy/"; echo "$out" | sed 's/^/# /'
  fi
else
  not_ok "yamllint not installed (apt-get install yamllint)"
fi

# 2. kustomize
tojson() {
  "$PY" -c '
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
json.dump([{"source": sys.argv[1], "object": d} for d in docs], sys.stdout)' "$1"
}
if ! command -v kubectl >/dev/null; then
  not_ok "kubectl not installed (apt-get install kubernetes-client): cannot render"
  exit 1
fi
for d in "$DEPLOY" "$DEPLOY/examples"; do
  name=${d#"$NVS_ROOT"/}
  if kubectl kustomize "$d" >"$T/$(basename "$d").yaml" 2>"$T/kustomize.err"; then
    n=$(grep -c '^kind:' "$T/$(basename "$d").yaml")
    ok "kubectl kustomize $name renders ($n objects)"
    tojson "$name" <"$T/$(basename "$d").yaml" >"$T/$(basename "$d").json"
  else
    not_ok "kubectl kustomize $name"; sed 's/^/# /' "$T/kustomize.err"
    exit 1
  fi
done
DEPLOY_JSON=$T/kubernetes.json
EXAMPLES_JSON=$T/examples.json

# 3. schema validation with kubernetes-models
if ! "$K8S/tools/install.sh" --check; then
  if "$K8S/tools/install.sh" 2>"$T/npm.log"; then
    ok "npm ci tests/k8s/tools (kubernetes-models)"
  else
    not_ok "npm ci tests/k8s/tools"; sed 's/^/# /' "$T/npm.log" | tail -20; exit 1
  fi
fi
node "$K8S/tools/validate.mjs" "$DEPLOY_JSON" "$EXAMPLES_JSON" >"$T/validate.out" 2>&1
while read -r status src obj rest; do
  case $status in
    OK) ok "schema: $src $obj" ;;
    ERR) not_ok "schema: $src $obj $rest" ;;
    *) diag "$status $src $obj $rest" ;;
  esac
done <"$T/validate.out"

# The validator must catch what it claims to: wrong types, misspelt fields
# at any depth, unknown kinds.
tojson fixture <"$K8S/fixtures/invalid-objects.yaml" >"$T/bad.json"
node "$K8S/tools/validate.mjs" "$T/bad.json" >"$T/bad.out" 2>&1
rc=$?
expect() { grep -qF -- "$1" "$T/bad.out"; }
if [ $rc -ne 0 ] && expect "containerPort must be integer" &&
   expect "unknown field spec.template.spec.hostpid" &&
   expect "unknown field spec.template.spec.containers[0].volumeMounts[0].readonly" &&
   expect "unknown field spec.template.spec.volumes[0].hostPath.typo" &&
   expect "unknown apiVersion/kind v1 Podd" && expect "OK fixture Pod/p"; then
  ok "validator rejects wrong types, unknown fields at any depth and unknown kinds"
else
  not_ok "validator self-test (rc $rc)"; sed 's/^/# /' "$T/bad.out"
fi

# 4. nvshare-specific checks
"$PY" "$K8S/check_manifests.py" "$DEPLOY_JSON" "$EXAMPLES_JSON" "$DEPLOY" >"$T/check.out" 2>&1
while read -r status rest; do
  case $status in
    OK) ok "$rest" ;;
    ERR) not_ok "$rest" ;;
    *) diag "$status $rest" ;;
  esac
done <"$T/check.out"
