#!/usr/bin/env bash
# The Pod annotation nvshare.com/unified-memory: "false" (docs/kubernetes.md
# "Device memory for CUDA IPC"): the scheduler tells the Pod's processes
# (MEMORY_MODE, right after WELCOME) and a real CUDA client (sim_app under
# libnvshare.so on the simulated GPU) makes even its first allocation device
# memory, without NVSHARE_UNIFIED_MEMORY in its environment; a Pod without
# it stays managed; an annotation added later switches the running process
# for its later allocations; a bad value is reported and ignored.
# shellcheck disable=SC1091,SC2016,SC2154 # libs by path; inner sh -c scripts; PID_* set by fcpod
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/k8s_lib.sh"

APP=$B/tests/e2e/sim_app
UD=0a1b2c3d-0000-4000-8000-0000000000d1
UP=0a1b2c3d-0000-4000-8000-0000000000d2
if ! mkcerts; then not_ok "openssl makes a CA and a server certificate"; exit 1; fi
printf 'token-D\n' >"$T/token"
cat >"$T/pods.json" <<EOF2
[{"uid":"$UD","name":"ipc","namespace":"team-d","annotations":{"nvshare.com/unified-memory":"false"}},
 {"uid":"$UP","name":"plain","namespace":"team-d"}]
EOF2
start_api token-D "$T/pods.json" || { not_ok "fake API server starts"; exit 1; }
start_kube_scheduler
wait_event 5 k8s_list pods=2 || not_ok "scheduler listed the pods"

# app NAME UID: sim_app in Pod UID (its own <proc-root>/<pid>/cgroup), with
# the library's DEBUG lines (one per allocation) on $T/NAME.err.
app() {
  bg sh -c 'd=$1/$$; mkdir -p "$d"; printf "%s\n" "$2" >"$d/cgroup"; shift 2; exec env NVSHARE_DEBUG=1 LD_PRELOAD="$PRELOAD" "$@"' \
    sh "$PROC" "$(cg_systemd_v2 "$2")" "$APP" --name "$1" --alloc 64Mi --kernels 100000 --kernel-us 1000 \
    --report summary >"$T/$1.out" 2>"$T/$1.err"
  eval "PID_$1=${_pids[-1]}"
}
SWITCH='nvshare.com/unified-memory="false" \(from the scheduler\)'
# dev_mem PID: the status's device_memory of the client with that pid.
dev_mem() { "$CTL" --json | jq -r --argjson p "$1" '.clients[] | select(.pid == $p) | .device_memory'; }

# ---- 1. The annotated Pod: device memory from the first allocation ----
app D "$UD"
check "the allocation was made (its DEBUG line)" wait_log 10 "$T/D.err" 'cuMemAlloc: .* on GPU 0 -> '
check "... as device memory" grep -qE 'cuMemAlloc: .* -> device memory' "$T/D.err"
check "the library logged the switch and its cause" grep -qE "$SWITCH" "$T/D.err"
sw=$(grep -nE "$SWITCH" "$T/D.err" | head -1 | cut -d: -f1)
al=$(grep -nE 'cuMemAlloc: .* -> ' "$T/D.err" | head -1 | cut -d: -f1)
check "... before the first allocation (line $sw < $al)" test "${sw:-0}" -gt 0 -a "${sw:-0}" -lt "${al:-0}"
check "the scheduler sent MEMORY_MODE at registration (nothing attached yet)" \
  has_event memory_mode_sent pid="$PID_D" attached=0
check "status: device_memory true" wait_for 3 sh -c "[ \"\$(\"\$0\" --json | jq -r '.clients[] | select(.pid == $PID_D) | .device_memory')\" = true ]" "$CTL"

# ---- 2. A Pod without it stays managed ----
app P "$UP"
check "plain Pod: the allocation was made" wait_log 10 "$T/P.err" 'cuMemAlloc: .* on GPU 0 -> '
check "... as managed memory" grep -qE 'cuMemAlloc: .* -> managed' "$T/P.err"
check "... no switch line, no MEMORY_MODE" \
  sh -c '! grep -qE "$0" "$1" && [ "$2" = 0 ]' "$SWITCH" "$T/P.err" "$(count_events memory_mode_sent pid="$PID_P")"
check "status: device_memory false" test "$(dev_mem "$PID_P")" = false

# ---- 3. A bad value is reported and ignored; a later "false" switches ----
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/unified-memory\":\"maybe\"}}"
check "a bad value is reported" wait_event 3 pod_annotation_invalid namespace='"team-d"' pod='"plain"' \
  key='"nvshare.com/unified-memory"' value='"maybe"'
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/unified-memory\":\"false\"}}"
check "an annotation added later reaches the running process" \
  wait_event 3 memory_mode_sent pid="$PID_P" attached=1
check "... which logs the switch" wait_log 3 "$T/P.err" "$SWITCH"
check "... exactly once (the invalid value sent nothing)" test "$(count_events memory_mode_sent pid="$PID_P")" = 1
check "status: device_memory true now" test "$(dev_mem "$PID_P")" = true

# ---- 4. Only clients that understand it are told ----
# READY comes after the GPU_MODE that answers ATTACH_GPU, which the
# scheduler sends after WELCOME and any MEMORY_MODE: no sleep needed.
u=(--gpu-uuid GPU-fake --total 1Gi --alloc 1Mi --script "until $T/end")
fcpod old "$(cg_systemd_v2 "$UD")" "${u[@]}"
fcpod new "$(cg_systemd_v2 "$UD")" "${u[@]}" --hello-flag memory-mode
check "a client with HELLO flag 0x40 gets MEMORY_MODE (before its GPU_MODE)" \
  sh -c 'grep -q READY "$0" && [ "$(grep -nE "MSG MEMORY_MODE" "$0" | cut -d: -f1)" -lt "$(grep -nE "GPU_MODE" "$0" | head -1 | cut -d: -f1)" ]' "$T/new.out"
check "one without it gets none and is not counted as device memory" \
  sh -c 'grep -q READY "$0" && ! grep -q MEMORY_MODE "$0" && [ "$1" = false ]' "$T/old.out" "$(dev_mem "$PID_old")"
check "the apps are still running, unharmed" kill -0 "$PID_D" "$PID_P"
echo "1..$_tap_n"
