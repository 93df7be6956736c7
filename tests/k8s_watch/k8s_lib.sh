# shellcheck shell=bash disable=SC2154,SC2034 # variables for the tests that source it
# Helpers for the Pod watch tests (source after tests/lib.sh and
# tests/sched/sched_lib.sh): a TLS CA and server certificate, the fake API
# server (fake_apiserver.py) with its control FIFO, a fake proc root, and
# fake clients placed in fake Pod cgroups.
PY=/usr/bin/python3
API_PY=$NVS_ROOT/tests/k8s_watch/fake_apiserver.py
PROC=$T/proc
NODE=node-1
mkdir -p "$PROC"

# The fake proc root is the scheduler's whole view of /proc: a process
# without a cgroup file there is an unknown tenant, refused on the admin
# socket. nvsharectl runs as a host process (not in a Pod) through this
# wrapper, which writes a non-Pod cgroup for its own pid and execs it.
cat >"$T/nvsharectl-host" <<EOF_CTL
#!/bin/sh
mkdir -p "$PROC/\$\$" && echo "0::/user.slice/user-0.slice/session-1.scope" >"$PROC/\$\$/cgroup"
exec "$B/nvsharectl" "\$@"
EOF_CTL
chmod +x "$T/nvsharectl-host"
CTL=$T/nvsharectl-host

# mkcerts: $T/ca.crt (test CA) and $T/srv.{crt,key} for 127.0.0.1 and
# localhost; $T/other-ca.crt, a CA that signed nothing here.
mkcerts() {
  local o=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${o[@]}" -keyout "$T/ca.key" -out "$T/ca.crt" -days 2 \
    -subj /CN=nvshare-test-ca >/dev/null 2>&1 &&
  openssl req -x509 "${o[@]}" -keyout "$T/other-ca.key" -out "$T/other-ca.crt" -days 2 \
    -subj /CN=other-ca >/dev/null 2>&1 &&
  openssl req "${o[@]}" -keyout "$T/srv.key" -out "$T/srv.csr" -subj /CN=localhost \
    >/dev/null 2>&1 &&
  printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$T/srv.ext" &&
  openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.crt" -CAkey "$T/ca.key" -CAcreateserial \
    -out "$T/srv.crt" -days 2 -extfile "$T/srv.ext" >/dev/null 2>&1
}

# start_api TOKEN [PODS_JSON_FILE [BIND_ADDR]]: starts the fake API server;
# sets API_URL and API_PORT; its log is $T/api.out; commands go through
# api_cmd; the ResourceSlices it holds are in $T/slices.json.
start_api() {
  mkfifo "$T/api.ctl"
  exec 9<>"$T/api.ctl"
  bg "$PY" "$API_PY" --cert "$T/srv.crt" --key "$T/srv.key" --token "$1" \
    --ctl "$T/api.ctl" --port-file "$T/api.port" ${2:+--pods "$2"} --slices-file "$T/slices.json" \
    --bind "${3:-127.0.0.1}" >"$T/api.out" 2>&1
  wait_for 10 test -s "$T/api.port" || return 1
  API_PORT=$(cat "$T/api.port")
  case "${3:-127.0.0.1}" in *:*) API_URL=https://[${3}]:$API_PORT;; *) API_URL=https://${3:-127.0.0.1}:$API_PORT;; esac
}

# api_cmd JSON: one control command (see fake_apiserver.py).
api_cmd() { echo "$1" >&9; }

# api_count PATTERN: lines in the API server log matching PATTERN.
api_count() { grep -cE "$1" "$T/api.out"; }
# api_more PATTERN N: more than N such lines (for wait_for).
api_more() { [ "$(api_count "$1")" -gt "$2" ]; }

# cg_systemd_v2 UID / cg_cgroupfs_v1 UID: /proc/<pid>/cgroup contents of
# a container of that Pod (systemd driver on cgroup v2, cgroupfs on v1).
CID=3f2e1d0c9b8a79685746352413021f0e3f2e1d0c9b8a79685746352413021f0e
cg_systemd_v2() {
  echo "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${1//-/_}.slice/cri-containerd-$CID.scope"
}
cg_cgroupfs_v1() {
  printf '12:memory:/kubepods/besteffort/pod%s/%s\n11:cpu,cpuacct:/kubepods/besteffort/pod%s/%s\n1:name=systemd:/kubepods/besteffort/pod%s/%s\n0::/\n' \
    "$1" "$CID" "$1" "$CID" "$1" "$CID"
}

# fcpod NAME CGROUP [fake_client args...]: a fake client whose
# <proc-root>/<pid>/cgroup holds CGROUP, written before it connects (the
# shell writes it for its own pid, then execs the client).
fcpod() {
  local name=$1 cg=$2; shift 2
  # shellcheck disable=SC2016 # expanded by the inner shell
  bg sh -c 'd=$1/$$; mkdir -p "$d"; printf "%s\n" "$2" >"$d/cgroup"; shift 2; exec "$@"' \
    sh "$PROC" "$cg" "$FC" --name "$name" "$@" >"$T/$name.out" 2>&1
  eval "PID_$name=${_pids[-1]}"
  wait_for 5 grep -qE ' (READY|EXIT)' "$T/$name.out"
}

# start_kube_scheduler [extra args]: the scheduler against the fake API.
start_kube_scheduler() {
  start_scheduler --no-nvml --proc-root "$PROC" --kube-api "$API_URL" \
    --kube-token-file "$T/token" --kube-ca-file "$T/ca.crt" --node-name "$NODE" "$@"
}

# last_limits NAME: "core mem" of NAME's last SET_LIMITS line ("" none).
last_limits() {
  grep -E ' SET_LIMITS ' "$T/$1.out" | tail -1 | sed -E 's/.*core_limit=([0-9]+) mem_limit=([0-9]+).*/\1 \2/'
}
# limits_are NAME CORE MEM: NAME's last SET_LIMITS has these values.
limits_are() { [ "$(last_limits "$1")" = "$2 $3" ]; }
# nlimits NAME: SET_LIMITS lines NAME got.
nlimits() { grep -cE ' SET_LIMITS ' "$T/$1.out"; }

# latency_us NAME UID CORE MEM: microseconds from the API server's last "SENT ...
# uid=UID" to NAME's first SET_LIMITS with these values after it.
latency_us() {
  local sent got
  sent=$(grep -E " SENT MODIFIED uid=$2 " "$T/api.out" | tail -1 | awk '{print $1}')
  got=$(awk -v s="$sent" -v p="core_limit=$3 mem_limit=$4\$" '$2 == "SET_LIMITS" && $1 >= s && $0 ~ p { print $1; exit }' "$T/$1.out")
  [ -n "$sent" ] && [ -n "$got" ] || return 1
  echo $(( got - sent ))
}

# one_pod_scheduler UID NAME NAMESPACE CORE MEM [scheduler args...]: the
# fake API server serving one Pod of this node annotated with these
# limits, and the scheduler watching it (returns once it LISTed the Pod;
# 1 on failure, reported).
one_pod_scheduler() {
  if ! mkcerts; then not_ok "openssl makes a CA and a server certificate"; return 1; fi
  printf 'token-1\n' >"$T/token"
  printf '[{"uid":"%s","name":"%s","namespace":"%s","annotations":{"nvshare.com/gpu-core-limit":"%s","nvshare.com/gpu-memory-limit":"%s"}}]\n' \
    "$1" "$2" "$3" "$4" "$5" >"$T/pods.json"
  start_api token-1 "$T/pods.json" || { not_ok "fake API server starts"; return 1; }
  shift 5
  start_kube_scheduler "$@"
  wait_event 5 k8s_list pods=1 || { not_ok "the scheduler LISTs the Pod"; return 1; }
}
