#!/usr/bin/env bash
# An unmanaged GPU process in a Pod is reported with that Pod: its cgroup
# (a fake proc root) gives the Pod UID, the Pod watch (the fake API server)
# its namespace and name - in the status JSON and in its one
# unmanaged_found event.
# Nothing the process says is used.
# shellcheck disable=SC1091,SC2016 # libs by path; inner sh -c script
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$NVS_ROOT/tests/security/unmanaged_lib.sh"

APP=$B/tests/e2e/sim_app
if [ ! -x "$B/tests/sim/libnvidia-ml.so.1" ] || [ ! -x "$APP" ]; then
  ok "# SKIP simulated GPU not built"; exit 0
fi
UP=0a1b2c3d-0000-4000-8000-0000000000f1
if ! mkcerts; then not_ok "openssl makes a CA and a server certificate"; exit 1; fi
printf 'token-F\n' >"$T/token"
cat >"$T/pods.json" <<EOF
[{"uid":"$UP","name":"notebook","namespace":"team-f","annotations":{}}]
EOF
start_api token-F "$T/pods.json" || { not_ok "fake API server starts"; exit 1; }
# NVML on (the simulated GPU), Pods from the fake API server.
start_scheduler --proc-root "$PROC" --kube-api "$API_URL" --kube-token-file "$T/token" \
  --kube-ca-file "$T/ca.crt" --node-name "$NODE"
# Waits for what must happen are hang guards stretched by the speed factor,
# the listing too (a 2 s detection interval and the pass: under 5 s on a
# quiet machine, docs/security.md; not asserted here).
HG=$(scaled 15)
LAT=$HG
check "the watch listed the Pod" wait_event "$HG" k8s_list pods=1

# The shell writes its own <proc-root>/<pid>/cgroup (a container of the
# Pod), then execs the application without the library (same pid).
bg sh -c 'd=$1/$$; mkdir -p "$d"; printf "%s\n" "$2" >"$d/cgroup"; shift 2; exec "$@"' \
  sh "$PROC" "$(cg_systemd_v2 "$UP")" "$APP" --name rogue --report progress --kernels 2 \
  --idle-after 1 --hold >"$T/rogue.out" 2>&1
PID=${_pids[-1]}
# Until the test ends (--hold); its context exists once its first kernel ran.
wait_log "$HG" "$T/rogue.out" "^PROGRESS name=rogue kernel=1/"

check "listed in the status with its Pod (hang guard $LAT s)" \
  wait_for "$LAT" st_is "[(p['pid'], p['pod']) for p in s['unmanaged']['processes']]" \
  "[($PID, {'uid': '$UP', 'name': 'notebook', 'namespace': 'team-f'})]"
found() { count_events unmanaged_found gpu=0 pid="$PID" pod_uid="\"$UP\"" namespace='"team-f"' pod='"notebook"'; }
check "reported (unmanaged_found), naming the Pod" test "$(found)" = 1
# A later detection pass (the status's pass counter, read after the report
# was on the stream, goes up) has not reported it again.
read_checks
check "another detection pass ran" wait_for "$(scaled 10)" st_is "s['unmanaged']['checks'] > $c1" True
check "... and it is still reported once" test "$(count_events unmanaged_found pid="$PID")" = 1
