#!/usr/bin/env bash
# Identity is pinned at connect, from the process that connected, never
# from what the client says (docs/security.md):
#  - a nested "pod<other uid>" cgroup directory inside a Pod's own cgroup
#    is attributed to the outer Pod (its limits, its name);
#  - a forged HELLO name is a claim: shown as claimed_name, never the Pod,
#    never the limits;
#  - connect-then-exit (the connecting process hands the socket to a child
#    and exits before the scheduler accepts) gets the limits of the Pod its
#    pid was last seen in, else the unknown-tenant limits: never none.
#    Deterministic: the scheduler is stopped (SIGSTOP) across the exit.
#  - the same without SO_PEERPIDFD (kernels < 6.5, simulated by a shim):
#    the fallback (immediate read, kill(pid, 0)) still finds the Pod and
#    still treats the exited peer as unknown.
# shellcheck disable=SC1091,SC2016,SC2119,SC2154 # libs by path; inner sh -c scripts; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$(dirname "$0")/sec_lib.sh"
UP=0a1b2c3d-0000-4000-8000-0000000000a1
UQ=0a1b2c3d-0000-4000-8000-0000000000b2
if ! mkcerts; then not_ok "openssl makes a CA and a server certificate"; exit 1; fi
printf 'token-S\n' >"$T/token"
cat >"$T/pods.json" <<EOF2
[{"uid":"$UP","name":"trainer","namespace":"team-p",
  "annotations":{"nvshare.com/gpu-core-limit":"30","nvshare.com/gpu-memory-limit":"256"}},
 {"uid":"$UQ","name":"victim","namespace":"team-q",
  "annotations":{"nvshare.com/gpu-core-limit":"70","nvshare.com/gpu-memory-limit":"512"}}]
EOF2
start_api token-S "$T/pods.json" || { not_ok "fake API server starts"; exit 1; }
# Unknown tenants: configured limits (defaults 10 % and 1Gi).
export NVSHARE_UNKNOWN_TENANT_CORE_LIMIT=15 NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT=300
start_kube_scheduler || { not_ok "scheduler starts"; exit 1; }
wait_event 5 k8s_list pods=2 || not_ok "scheduler listed the pods"
MiB=$((1 << 20))
# client NAME JSON: NAME's client entry in the admin status JSON.
client_of() { "$PY" -c 'import json,sys; print(json.dumps([c for c in json.loads(sys.argv[1])["clients"] if c["pid"]==int(sys.argv[2])][0]))' "$("$CTL" --json)" "$1"; }

# Nested pod<uid>: Pod P's container made a sub-cgroup named after Pod Q,
# in both driver shapes.
fcpod N1 "$(cg_systemd_v2 "$UP")/pod$UQ" --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;hold 30s'
fcpod N2 "$(cg_systemd_v2 "$UP")/kubepods-pod${UQ//-/_}.slice" --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;hold 30s'
check "nested pod<Q> under Pod P (cgroupfs shape): P's limits (30 %, 256Mi)" \
  wait_for 3 grep -q "SET_LIMITS gpu=0 core_limit=30 mem_limit=$((256 * MiB))$" "$T/N1.out"
check "nested kubepods-pod<Q>.slice under Pod P (systemd shape): P's limits" \
  wait_for 3 grep -q "SET_LIMITS gpu=0 core_limit=30 mem_limit=$((256 * MiB))\$" "$T/N2.out"
c=$(client_of "$PID_N1")
check "status: the nested client is in team-p/trainer, tenant from its cgroup, read confirmed by a pidfd" \
  jpy "$c" "j['pod']['uid']=='$UP' and j['pod']['name']=='trainer' and j['tenant']=={'kind':'pod','source':'cgroup','pidfd':True}"

# A forged HELLO name: Pod P's client calls itself after Pod Q and kubelet.
fcpod F "$(cg_systemd_v2 "$UP")" --name victim --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;hold 30s'
check "forged name 'victim': the client still gets Pod P's limits" \
  wait_for 3 grep -q "SET_LIMITS gpu=0 core_limit=30 mem_limit=$((256 * MiB))\$" "$T/F.out"
c=$(client_of "$PID_F")
check "status: claimed_name 'victim' shown as a claim, Pod from the cgroup (team-p/trainer)" \
  jpy "$c" "j['claimed_name']=='victim' and j['pod']['name']=='trainer' and 'name' not in j"
check "hello event: 'victim' is the name the client said, its tenant Pod P from the cgroup" \
  has_event hello pid="$PID_F" name='"victim"' tenant="\"pod:$UP\""

# Connect-then-exit, never seen before: unknown-tenant limits.
"$PY" "$NVS_ROOT/tests/security/escape.py" "$PROC" "$(cg_systemd_v2 "$UQ")" \
  "$NVSHARE_SOCK_DIR/scheduler.sock" "$SCHED_PID" -- "$FC" --name esc1 --gpu-uuid GPU-id \
  --script 'wait SET_LIMITS 10s;hold 20s' >"$T/E1.out" 2>&1 &
EP=$!
wait_exit 10 "$EP"
check "escape 1: the connecting process handed its socket over and exited" \
  sh -c "test $RC = 0 && grep -q HANDED '$T/E1.out'"
_pids+=("$(sed -n 's/.*to pid \([0-9]*\).*/\1/p' "$T/E1.out")")
kill -CONT "$SCHED_PID"
check "escape 1 (no history): unknown-tenant limits (15 %, 300Mi), not none" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=15 mem_limit=$((300 * MiB))\$" "$T/E1.out"
j=$("$CTL" --json)
check "status: tenant unknown, with why" \
  jpy "$j" "[c['tenant'] for c in j['clients'] if c['claimed_name']=='esc1'][0]['kind']=='unknown' and 'exited' in [c['tenant'] for c in j['clients'] if c['claimed_name']=='esc1'][0]['why']"

# Connect-then-exit from a pid seen in Pod Q before: Q's limits.
"$PY" "$NVS_ROOT/tests/security/escape.py" "$PROC" "$(cg_systemd_v2 "$UQ")" \
  "$NVSHARE_SOCK_DIR/scheduler.sock" "$SCHED_PID" --prime -- "$FC" --name esc2 --gpu-uuid GPU-id \
  --script 'wait SET_LIMITS 10s;hold 20s' >"$T/E2.out" 2>&1 &
EP=$!
wait_exit 10 "$EP"
check "escape 2: primed in Pod Q, then handed over and exited" \
  sh -c "test $RC = 0 && grep -q PRIMED '$T/E2.out' && grep -q HANDED '$T/E2.out'"
_pids+=("$(sed -n 's/.*to pid \([0-9]*\).*/\1/p' "$T/E2.out")")
kill -CONT "$SCHED_PID"
check "escape 2 (pid last seen in Pod Q): Q's limits (70 %, 512Mi)" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=70 mem_limit=$((512 * MiB))\$" "$T/E2.out"
j=$("$CTL" --json)
check "status: tenant unknown, source pid-history, Pod team-q/victim" \
  jpy "$j" "[(c['tenant']['kind'], c['tenant']['source'], c['pod']['name']) for c in j['clients'] if c['claimed_name']=='esc2'][0]==('unknown','pid-history','victim')"
check "scheduler healthy" sched_alive

# The fallback without SO_PEERPIDFD: a second scheduler with the shim.
kill -TERM "$SCHED_PID"; wait_exit 5 "$SCHED_PID"
shim_preload "$B/tests/security/no_peerpidfd.so"
bg env LD_PRELOAD="$SHIM_PRELOAD" ASAN_OPTIONS="$SHIM_ASAN_OPTIONS" "$B/nvshare-scheduler" \
  --no-nvml --no-kube --proc-root "$PROC" >>"$T/fallback.log" 2>&1
SCHED_PID=${_pids[-1]}
wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || not_ok "fallback scheduler starts"
fcpod K "$(cg_systemd_v2 "$UP")" --gpu-uuid GPU-id --script 'hold 20s'
c=$(client_of "$PID_K")
check "fallback: a Pod client is still identified from its cgroup (no pidfd)" \
  jpy "$c" "j['pod']['uid']=='$UP' and j['tenant']=={'kind':'pod','source':'cgroup','pidfd':False}"
"$PY" "$NVS_ROOT/tests/security/escape.py" "$PROC" "$(cg_systemd_v2 "$UQ")" \
  "$NVSHARE_SOCK_DIR/scheduler.sock" "$SCHED_PID" -- "$FC" --name esc3 --gpu-uuid GPU-id \
  --script 'wait SET_LIMITS 10s;hold 20s' >"$T/E3.out" 2>&1 &
EP=$!
wait_exit 10 "$EP"
_pids+=("$(sed -n 's/.*to pid \([0-9]*\).*/\1/p' "$T/E3.out")")
kill -CONT "$SCHED_PID"
check "fallback: connect-then-exit is still an unknown tenant with its limits (15 %, 300Mi)" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=15 mem_limit=$((300 * MiB))\$" "$T/E3.out"
check "fallback scheduler healthy" sched_alive
echo "1..$_tap_n"
