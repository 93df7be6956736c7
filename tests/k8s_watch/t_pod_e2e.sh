#!/usr/bin/env bash
# End to end: a real CUDA client (sim_app under libnvshare.so on the
# simulated GPU) placed in a fake Pod cgroup gets the limits of its Pod's
# annotations from the API server, and a `kubectl annotate` (a MODIFIED
# event) reaches the running process within a second: cuMemGetInfo and its
# allocations follow the new memory limit, the quota its new core limit.
# shellcheck disable=SC1091,SC2016 # libs by path; inner sh -c scripts
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/k8s_lib.sh"

APP=$B/tests/e2e/sim_app
UP=0a1b2c3d-0000-4000-8000-0000000000e2
one_pod_scheduler "$UP" notebook team-e 30 256 || exit 1

# The shell writes its own <proc-root>/<pid>/cgroup, then execs the app
# under the preload (same pid: the scheduler sees it by SO_PEERCRED).
bg sh -c 'd=$1/$$; mkdir -p "$d"; printf "%s\n" "$2" >"$d/cgroup"; shift 2; exec env LD_PRELOAD="$PRELOAD" "$@"' \
  sh "$PROC" "$(cg_systemd_v2 "$UP")" "$APP" --name nb --alloc 128Mi --kernels 20000 --kernel-us 1000 \
  --report summary >"$T/app.out" 2>"$T/app.err"
APP_PID=${_pids[-1]}
check "the client's process got its Pod's memory limit (256 MiB, a bare number is MiB)" \
  wait_log 5 "$T/app.err" 'GPU 0: memory limit 256Mi'
check "and its compute limit (30%)" wait_log 5 "$T/app.err" 'GPU 0: compute limit 30%'
j=$("$CTL" --json)
check "nvsharectl --json: the client is in team-e/notebook with 30% and 256 MiB" \
  sh -c 'echo "$0" | grep -qF "\"name\":\"notebook\",\"namespace\":\"team-e\",\"core_limit\":30,\"mem_limit\":268435456"' "$j"
check "the scheduler serializes the GPU for the limited client (quota on: GPU_MODE 2)" \
  wait_event 3 gpu_mode_sent pid="$APP_PID" value=2

t0=$(date +%s%N)
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"60\",\"nvshare.com/gpu-memory-limit\":\"1Gi\"}}"
# A hang guard scaled by the machine's speed, not a latency claim (one
# second was missed once under ASan on a loaded machine); the time taken
# is printed.
if wait_for "$(scaled 5)" grep -q 'GPU 0: memory limit 1Gi' "$T/app.err"; then
  ok "annotation change reached the running process ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
else
  not_ok "annotation change reached the running process (hang guard $(scaled 5) s)"
fi
check "new compute limit 60% in the process" wait_log "$(scaled 2)" "$T/app.err" 'GPU 0: compute limit 60%'
n_lim=$(count_events set_limits pid="$APP_PID")
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"lots\"}}"
check "an invalid value is reported by the scheduler and ignored (keeping 60)" \
  wait_event 2 pod_annotation_invalid namespace='"team-e"' pod='"notebook"' \
    key='"nvshare.com/gpu-core-limit"' value='"lots"' keeping=60
# Not after a sleep: a later valid change (61 %) is the marker. The
# scheduler's messages reach the process in order, so a limit sent for the
# invalid value would have been applied (and logged) before 61 %.
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"61\"}}"
check "a later valid change (61%) reaches the process" wait_log 10 "$T/app.err" 'GPU 0: compute limit 61%'
cores=$(event_field core_limit set_limits pid="$APP_PID" | tail -n +$((n_lim + 1)) | grep -v '^61$' | sort -u | tr '\n' ' ')
check "the scheduler sent nothing but 60% before 61% (sent: ${cores:-none})" \
  test -z "$cores" -o "$cores" = "60 "
check "the process kept 60% until then (no compute limit line for the invalid value)" \
  test "$(grep -c 'GPU 0: compute limit' "$T/app.err")" = 3
# nvshare.com/priority: the class co-scheduling gives the Pod's clients.
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"61\",\"nvshare.com/priority\":\"interactive\"}}"
check "nvshare.com/priority=interactive reaches the client's class" \
  wait_for 3 sh -c '"$0" --json | grep -qF "\"class\":\"interactive\",\"class_source\":\"annotation\""' "$CTL"
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"61\",\"nvshare.com/priority\":\"urgent\"}}"
check "an invalid priority is reported and ignored" \
  wait_event 2 pod_annotation_invalid namespace='"team-e"' pod='"notebook"' \
    key='"nvshare.com/priority"' value='"urgent"'
check "the app is still running, unharmed" kill -0 "$APP_PID"
echo "1..$_tap_n"
