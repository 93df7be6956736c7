#!/usr/bin/env bash
# The scheduler built with K8S=0 (make K8S=0, into build-nok8s/; .ci/run
# runs this test there): no libcurl linked, starts and schedules without
# the Pod watch ("not-built" in the status and the k8s_watch event), and
# refuses to start, naming the cause, when the watch is asked for
# (--kube-api, NVSHARE_KUBE=1, NODE_NAME inside a cluster) unless --no-kube.
# Against the full build it checks that build's side: libcurl linked and
# the watch "off" when not configured.
# shellcheck disable=SC1091 # libs by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"

stop_sched() { kill -TERM "$SCHED_PID" 2>/dev/null; wait_exit 5 "$SCHED_PID"; }

if ldd "$B/nvshare-scheduler" | grep -q libcurl; then
  check "full build: libcurl linked" true
  start_scheduler --no-nvml
  check "full build: the watch is off when not configured" wait_for 5 json_has '"watch":"off"'
  stop_sched
  ok "K8S=0 build # SKIP $B is the full build (.ci/run tests build-nok8s)"
  exit 0
fi

check "K8S=0: no libcurl linked" sh -c "! ldd '$B/nvshare-scheduler' | grep -q curl"
start_scheduler --no-nvml
check "K8S=0: starts; the status says the watch is not built" \
  wait_for 5 json_has '"watch":"not-built"'
check "K8S=0: k8s_watch event off/not-built" \
  wait_event 5 k8s_watch state='"off"' reason='"not-built"'
fc A --gpu-uuid GPU-k8soff-0 --script stay
check "K8S=0: a client attaches and is shown" wait_for 5 json_has 'GPU-k8soff-0'
kill "$PID_A" 2>/dev/null
stop_sched

# ask NAME CAUSE ENV... -- ARGS...: the scheduler exits 1 at once; its
# error names the K8S=0 build and CAUSE (a fixed string).
ask() {
  local name=$1 cause=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  : >"$T/ask.log"
  env "${envs[@]}" timeout 20 "$B/nvshare-scheduler" --no-nvml "$@" >"$T/ask.log" 2>&1
  local rc=$?
  check "K8S=0: $name: exits 1 (rc $rc)" test "$rc" = 1
  check "K8S=0: $name: the error names the K8S=0 build" grep -qF 'built with K8S=0' "$T/ask.log"
  check "K8S=0: $name: the error names the cause" grep -qF -- "$cause" "$T/ask.log"
}
ask "--kube-api" "--kube-api" -- --kube-api https://127.0.0.1:1 --node-name node-1
ask "NVSHARE_KUBE=1" "NVSHARE_KUBE=1" NVSHARE_KUBE=1 --
ask "NODE_NAME in a cluster" "NODE_NAME inside a cluster" \
  NODE_NAME=node-1 KUBERNETES_SERVICE_HOST=127.0.0.1 --
grep -q 'K8S=1, or pass --no-kube' "$T/ask.log"
check "K8S=0: the error says how to mend it (K8S=1 or --no-kube)" test $? = 0

start_scheduler --no-nvml --no-kube --kube-api https://127.0.0.1:1 --node-name node-1
check "K8S=0: --no-kube wins over --kube-api: starts" sched_alive
stop_sched
