#!/usr/bin/env bash
# Pod watch configuration: in-cluster settings from the environment
# (KUBERNETES_SERVICE_HOST/PORT with an IPv6 literal in brackets,
# NODE_NAME), TLS verification (a CA that did not sign the server is
# refused), flag errors, --no-kube, the watch being off outside a cluster,
# NVSHARE_PROC_ROOT, and pod/namespace labels on the Prometheus metrics.
# shellcheck disable=SC1091,SC2016,SC2119 # libs by path; inner sh -c scripts
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/k8s_lib.sh"

UA=0a1b2c3d-0000-4000-8000-00000000000a
if ! mkcerts; then not_ok "openssl makes a CA and a server certificate"; exit 1; fi
printf 'tok\n' >"$T/token"
cat >"$T/pods.json" <<EOF
[{"uid":"$UA","name":"trainer","namespace":"team-a",
  "annotations":{"nvshare.com/gpu-core-limit":"30","nvshare.com/gpu-memory-limit":"1Gi"}}]
EOF
v6=0
if "$PY" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
  v6=1; start_api tok "$T/pods.json" ::1 || { not_ok "fake API server on ::1"; exit 1; }
else
  start_api tok "$T/pods.json" || { not_ok "fake API server"; exit 1; }
fi
stop_sched() { kill -TERM "$SCHED_PID" 2>/dev/null; wait_exit 5 "$SCHED_PID"; }
# Each phase starts with an empty log and event stream (the previous
# scheduler has exited).
newlog() { : >"$T/scheduler.log"; : >"$NVSHARE_EVENTS"; }

# In-cluster configuration from the environment (paths overridden: the
# real service-account directory is not ours to write in a test).
newlog
if [ $v6 = 1 ]; then host=::1; else host=127.0.0.1; fi
KUBERNETES_SERVICE_HOST=$host KUBERNETES_SERVICE_PORT=$API_PORT NODE_NAME=node-1 \
  NVSHARE_KUBE_TOKEN_FILE=$T/token NVSHARE_KUBE_CA_FILE=$T/ca.crt NVSHARE_PROC_ROOT=$PROC \
  start_scheduler --no-nvml --metrics --metrics-addr 127.0.0.1 --metrics-port 0
if [ $v6 = 1 ]; then
  check "in-cluster env: IPv6 service host in brackets" \
    wait_event 5 k8s_watch state='"on"' node='"node-1"' api="\"https://\\[::1\\]:$API_PORT\""
else
  check "in-cluster env: service host and port" \
    wait_event 5 k8s_watch state='"on"' node='"node-1"' api="\"https://127\\.0\\.0\\.1:$API_PORT\""
fi
check "in-cluster env: LIST with the token and CA from the environment" wait_event 5 k8s_list pods=1
fcpod A "$(cg_systemd_v2 "$UA")" --gpu-uuid GPU-cfg-0 --script stay
check "NVSHARE_PROC_ROOT: client A found in its pod and limited (30%, 1Gi)" \
  wait_for 3 limits_are A 30 $((1 << 30))
wait_event 5 metrics_listening
MPORT=$(event_field port metrics_listening | tail -1)
# Client series are per tenant: A's Pod, by name (docs/metrics.md). Waits
# for the next publish of the metrics (periodic) instead of sleeping.
check "metrics: A's tenant series is its Pod (pod and namespace labels)" wait_for 5 \
  sh -c 'curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" | grep -qxF "nvshare_client_processes{gpu=\"0\",pod=\"trainer\",namespace=\"team-a\"} 1"' sh "$MPORT"
kill "$PID_A" 2>/dev/null
stop_sched

# TLS verification is on: a CA that did not sign the server's certificate.
newlog
start_scheduler --no-nvml --kube-api "$API_URL" --kube-token-file "$T/token" \
  --kube-ca-file "$T/other-ca.crt" --node-name node-1
check "wrong CA: the TLS handshake is refused (k8s_request_failed tls)" \
  wait_event 5 k8s_request_failed op='"list"' reason='"tls"'
check "... and retried with back-off" wait_event 5 k8s_watch state='"backoff"' reason='"retry"'
check "... the scheduler keeps serving" sched_alive
stop_sched

# Flags and the environment.
newlog
"$B/nvshare-scheduler" --no-nvml --kube-api "$API_URL" >"$T/err.log" 2>&1; rc=$?
check "--kube-api without a node name: exit 1 (k8s_watch off needs-node-name)" \
  test "$rc" = 1 -a "$(count_events k8s_watch state='"off"' reason='"needs-node-name"')" = 1
check "... and tells the operator" grep -q 'needs --node-name' "$T/err.log"
"$B/nvshare-scheduler" --node-name "" >/dev/null 2>&1; rc=$?
check "--node-name '': usage error (2)" test "$rc" = 2
unset KUBERNETES_SERVICE_HOST
NODE_NAME=node-1 start_scheduler --no-nvml
check "NODE_NAME outside a cluster: watch off (event)" \
  wait_event 3 k8s_watch state='"off"' reason='"not-in-cluster"'
check "--json: watch off" json_has '"kube":{"watch":"off","pods":0}'
stop_sched
newlog
start_scheduler --no-nvml --no-kube --kube-api "$API_URL" --node-name node-1 --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token"
check "--no-kube: watch disabled" wait_event 3 k8s_watch state='"off"' reason='"disabled"'
stop_sched
newlog
KUBERNETES_SERVICE_HOST=127.0.0.1 NODE_NAME=node-1 NVSHARE_KUBE_TOKEN_FILE=$T/missing start_scheduler --no-nvml
check "in cluster without a token file: watch off (event)" \
  wait_event 3 k8s_watch state='"off"' reason='"no-token"'
stop_sched
