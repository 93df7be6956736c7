#!/usr/bin/env bash
# Settings that survive a restart (docs/scheduler.md "State file"): after
# nvsharectl changed mode, TQ, capacity, idle release and the limits of a
# client in a Pod and of one outside Pods, a restarted scheduler restores
# the settings and the Pod's limits from the state file, the clients say
# which limits they enforce (LIMITS_IN_FORCE), and the status shows them.
# A claim cannot loosen what is configured; a corrupt file is set aside,
# never fatal; SIGHUP is logged and ignored.
# shellcheck disable=SC1091,SC2016 # libs by path; inner sh -c scripts
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh" # fake proc root, nvsharectl-host as $CTL

POD=0a1b2c3d-0000-4000-8000-00000000ab01
HOSTCG="0::/user.slice/user-0.slice/session-1.scope"
SF=$NVSHARE_STATE_FILE
sched() { start_scheduler --no-kube --proc-root "$PROC"; }
# capp NAME CGROUP [sim_app args...]: sim_app under the library, its
# <proc-root>/<pid>/cgroup written first (same pid after exec).
capp() {
  local n=$1 cg=$2; shift 2
  bg sh -c 'd=$1/$$; mkdir -p "$d"; printf "%s\n" "$2" >"$d/cgroup"; shift 2; exec env LD_PRELOAD="$PRELOAD" "$@"' \
    sh "$PROC" "$cg" "$APP" --name "$n" --report progress "$@" >"$T/$n.out" 2>"$T/$n.err"
  eval "PID_$n=${_pids[-1]}"
}
# jq over the admin status
st() { "$CTL" --json | jq -r "$1"; }
# lim PID: "core mem" of that client's GPU 0 in the status
lim() { st ".clients[] | select(.pid == $1) | .gpus[0].limits | \"\\(.core_limit) \\(.mem_limit)\""; }
stop_sched() { kill -TERM "$SCHED_PID" && wait_for 10 sh -c "! kill -0 $SCHED_PID 2>/dev/null"; }

sched || { not_ok "scheduler starts"; show_logs; exit 1; }
check "first start: no state file yet, said so (state_loaded absent)" \
  wait_event 5 state_loaded path="\"$SF\"" result='"absent"'
capp A "$(cg_systemd_v2 "$POD")" --alloc 32Mi --kernels 1000000 --kernel-us 500
capp H "$HOSTCG" --alloc 32Mi --kernels 1000000 --kernel-us 500
check "both clients attach" wait_events 10 2 attach

"$CTL" -S on >/dev/null && "$CTL" -T 0.5 >/dev/null && "$CTL" --capacity 3Gi >/dev/null &&
  "$CTL" --idle-release 40 >/dev/null
check "nvsharectl changed mode, TQ, capacity, idle release" [ $? = 0 ]
"$CTL" --set-client "$PID_A" --core-limit 40 --memory-limit 200 >/dev/null
"$CTL" --set-client "$PID_H" --memory-limit 128 >/dev/null
check "the Pod's client enforces 200 MiB" wait_log 5 "$T/A.err" "memory limit 200Mi by the scheduler"
check "the host client enforces 128 MiB" wait_log 5 "$T/H.err" "memory limit 128Mi by the scheduler"
check "state file: version 1, 0600" sh -c "jq -e '.version == 1' '$SF' >/dev/null && [ \$(stat -c %a '$SF') = 600 ]"
check "state file: the Pod's limits under its UID; no per-pid entry" \
  sh -c "jq -e '.pods == [{\"uid\":\"$POD\",\"core_limit\":40,\"mem_limit\":\"$((200 << 20))\"}]' '$SF' >/dev/null"
check "state file: the settings for all GPUs" \
  sh -c "jq -e '.all == {\"mode\":\"on\",\"tq_ms\":500,\"capacity\":\"$((3 << 30))\",\"idle_release_ms\":40}' '$SF' >/dev/null"
check "no temporary file left" [ ! -e "$SF.tmp" ]

# ---- restart ----
stop_sched || not_ok "scheduler stops on SIGTERM"
sched || { not_ok "scheduler restarts"; show_logs; exit 1; }
check "restart: restored, and said so (4 settings for all GPUs, 1 Pod)" \
  wait_event 5 state_loaded path="\"$SF\"" result='"restored"' reason=null settings=4 gpus=0 pods=1
check "both clients re-register" wait_events 10 4 attach
check "the host client says it enforces 128 MiB (LIMITS_IN_FORCE)" \
  wait_event 10 limits_claimed pid="$PID_H" mem_limit=$((128 << 20))
check "the Pod's client says 40 % / 200 MiB" \
  wait_event 10 limits_claimed pid="$PID_A" core_limit=40 mem_limit=$((200 << 20))
check "status: defaults mode on, TQ 500 ms, idle release 40 ms" \
  [ "$(st '.defaults | "\(.mode) \(.tq_ms) \(.idle_release_ms)"')" = "on 500 40" ]
check "status: GPU 0 on, TQ 500 ms, capacity 3 GiB" \
  [ "$(st '.gpus[0] | "\(.mode) \(.tq_ms) \(.capacity)"')" = "on 500 $((3 << 30))" ]
check "status: the Pod's client 40 % / 200 MiB" [ "$(lim "$PID_A")" = "40 $((200 << 20))" ]
check "status: the host client 100 % / 128 MiB (what it enforces)" [ "$(lim "$PID_H")" = "100 $((128 << 20))" ]
capp C "$(cg_systemd_v2 "$POD")" --alloc 8Mi --kernels 1000000 --kernel-us 500
check "a new client of the same Pod gets the Pod's limits" wait_log 5 "$T/C.err" "memory limit 200Mi by the scheduler"
check "... and its compute limit" wait_log 5 "$T/C.err" "compute limit 40%"

# ---- a claim cannot loosen: the operator lowered the Pod's limit ----
stop_sched || not_ok "scheduler stops"
jq ".pods[0].mem_limit = \"$((100 << 20))\"" "$SF" >"$T/sf" && cp "$T/sf" "$SF"
n=$(count_events limits_claimed pid="$PID_A")
sched || { not_ok "scheduler restarts (2)"; show_logs; exit 1; }
check "the Pod's client claims 200 MiB again" wait_events 10 $((n + 1)) limits_claimed pid="$PID_A"
check "the stricter configured 100 MiB wins (status)" wait_for 5 sh -c "[ \"\$(\"$CTL\" --json | jq -r '.clients[] | select(.pid == $PID_A) | .gpus[0].limits.mem_limit')\" = $((100 << 20)) ]"
check "... and reaches the client" wait_log 5 "$T/A.err" "memory limit 100Mi by the scheduler"

# ---- SIGHUP: logged, ignored ----
kill -HUP "$SCHED_PID"
check "SIGHUP is logged (event)" wait_event 5 sighup
check "the scheduler still runs and answers" sh -c "kill -0 $SCHED_PID && '$CTL' --json >/dev/null"

# ---- a corrupt file: set aside, start from the configuration ----
stop_sched || not_ok "scheduler stops"
printf '{"version": 1, "all": {"mode": "sideways"}}' >"$SF"
sched || { not_ok "scheduler starts with a corrupt state file"; show_logs; exit 1; }
check "corrupt file reported (state_loaded ignored, bad-settings, moved)" \
  wait_event 5 state_loaded result='"ignored"' reason='"bad-settings"' moved=1 settings=0
check "... and moved aside to .bad" [ -f "$SF.bad" ]
check "configuration in force (mode auto, TQ 30 s)" [ "$(st '.defaults | "\(.mode) \(.tq_ms)"')" = "auto 30000" ]
printf '{"version": 7}' >"$SF"
stop_sched
sched || { not_ok "scheduler starts with an unknown version"; show_logs; exit 1; }
check "unknown version reported, not fatal" \
  wait_event 5 state_loaded result='"ignored"' reason='"unknown-version"'
finish
