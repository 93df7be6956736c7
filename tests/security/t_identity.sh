#!/usr/bin/env bash
# Identity is pinned at connect, from the process that connected, never
# from what the client says (docs/security.md):
#  - a nested "pod<other uid>" cgroup directory inside a Pod's own cgroup
#    is attributed to the outer Pod (its limits, its name);
#  - a forged HELLO name is a claim: shown as claimed_name, never the Pod,
#    never the limits;
#  - connect-then-exit (the connecting process hands the socket to a child
#    and exits before the scheduler accepts) is an unknown tenant with the
#    most restrictive limits on the node: per field, the smallest of the
#    unknown-tenant settings and every known Pod's limits (here 15 % from
#    the settings, 256Mi from Pod P): never none, never looser than any
#    Pod's own. Deterministic: the scheduler is stopped (SIGSTOP) across
#    the exit. The Pod its pid was last seen in (a bounded history, 1024
#    entries) is shown in the status, never applied. An admin's
#    --set-client overrides them. The status shows pid (the kernel's) and claimed_pid
#    (HELLO's) apart.
#  - identity is read once, at accept: a cgroup that changes later (the
#    client's messages go on) does not move the client to another Pod.
#  - the same without SO_PEERPIDFD (kernels < 6.5, simulated by a shim):
#    the fallback (immediate read, kill(pid, 0)) still finds the Pod and
#    still treats the exited peer as unknown, with the default
#    unknown-tenant limits (10 %, 1Gi) when none are configured; the
#    scheduler warns at start that --proc-root is not /proc.
#  - for lock turns every unknown peer is one tenant: two unknown clients
#    take turns with a Pod's client as one tenant, not two.
#  - a scheduler outside its clients' PID namespace sees them as pid 0:
#    unknown tenants with the unknown-tenant limits, refused on the admin
#    socket (skipped where unshare --pid is not permitted).
# shellcheck disable=SC1091,SC2016,SC2119,SC2154 # libs by path; inner sh -c scripts; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$(dirname "$0")/sec_lib.sh"
UP=0a1b2c3d-0000-4000-8000-0000000000a1
UQ=0a1b2c3d-0000-4000-8000-0000000000b2
pods_api "$UP:team-p/trainer:30:256" "$UQ:team-q/victim:70:512" || exit 1
# Unknown tenants: configured limits (defaults 10 % and 1Gi).
export NVSHARE_UNKNOWN_TENANT_CORE_LIMIT=15 NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT=300
start_kube_scheduler || { not_ok "scheduler starts"; exit 1; }
wait_event 5 k8s_list pods=2 || not_ok "scheduler listed the pods"
MiB=$((1 << 20))
# client NAME JSON: NAME's client entry in the admin status JSON.
client_of() { "$PY" -c 'import json,sys; print(json.dumps([c for c in json.loads(sys.argv[1])["clients"] if c["pid"]==int(sys.argv[2])][0]))' "$("$CTL" --json)" "$1"; }

# Nested pod<uid>: Pod P's container made a sub-cgroup named after Pod Q,
# in both driver shapes.
fcpod N1 "$(cg_systemd_v2 "$UP")/pod$UQ" --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
fcpod N2 "$(cg_systemd_v2 "$UP")/kubepods-pod${UQ//-/_}.slice" --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "nested pod<Q> under Pod P (cgroupfs shape): P's limits (30 %, 256Mi)" \
  wait_for 3 grep -q "SET_LIMITS gpu=0 core_limit=30 mem_limit=$((256 * MiB))$" "$T/N1.out"
check "nested kubepods-pod<Q>.slice under Pod P (systemd shape): P's limits" \
  wait_for 3 grep -q "SET_LIMITS gpu=0 core_limit=30 mem_limit=$((256 * MiB))\$" "$T/N2.out"
c=$(client_of "$PID_N1")
check "status: the nested client is in team-p/trainer, tenant from its cgroup, read confirmed by a pidfd" \
  jpy "$c" "j['pod']['uid']=='$UP' and j['pod']['name']=='trainer' and j['tenant']=={'kind':'pod','source':'cgroup','pidfd':True}"

# A forged HELLO name: Pod P's client calls itself after Pod Q and kubelet.
fcpod F "$(cg_systemd_v2 "$UP")" --name victim --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
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
  --script 'wait SET_LIMITS 10s;stay' >"$T/E1.out" 2>&1 &
EP=$!
wait_exit 10 "$EP"
check "escape 1: the connecting process handed its socket over and exited" \
  sh -c "test $RC = 0 && grep -q HANDED '$T/E1.out'"
E1CHILD=$(sed -n 's/.*to pid \([0-9]*\).*/\1/p' "$T/E1.out")
_pids+=("$E1CHILD")
kill -CONT "$SCHED_PID"
check "escape 1 (no history): the most restrictive limits on the node (15 %, 256Mi), not none" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=15 mem_limit=$((256 * MiB))\$" "$T/E1.out"
j=$("$CTL" --json)
check "status: pid is the connecting process's (SO_PEERCRED), claimed_pid the HELLO's ($E1CHILD)" \
  jpy "$j" "[(c['pid'], c['claimed_pid']) for c in j['clients'] if c['claimed_name']=='esc1'][0]==($EP, $E1CHILD)"
check "status: tenant unknown, source none (no pid history), with why" \
  jpy "$j" "[(c['tenant']['kind'], c['tenant']['source'], 'exited' in c['tenant']['why']) for c in j['clients'] if c['claimed_name']=='esc1'][0]==('unknown','none',True)"
# The admin still sets an unknown tenant's limits (the client's pid is the
# connecting process's, as the kernel reported it).
e1=$("$PY" -c 'import json,sys; print([c["pid"] for c in json.loads(sys.argv[1])["clients"] if c["claimed_name"]=="esc1"][0])' "$j")
out=$("$CTL" --set-client "$e1" --core-limit 55 --memory-limit 123 2>&1); rc=$?
check "admin --set-client on the unknown tenant: accepted ($out)" test "$rc" = 0
check "... and it overrides the unknown-tenant limits (55 %, 123Mi)" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=55 mem_limit=$((123 * MiB))\$" "$T/E1.out"

# Connect-then-exit from a pid seen in Pod Q before: Q's limits.
"$PY" "$NVS_ROOT/tests/security/escape.py" "$PROC" "$(cg_systemd_v2 "$UQ")" \
  "$NVSHARE_SOCK_DIR/scheduler.sock" "$SCHED_PID" --prime -- "$FC" --name esc2 --gpu-uuid GPU-id \
  --script 'wait SET_LIMITS 10s;stay' >"$T/E2.out" 2>&1 &
EP=$!
wait_exit 10 "$EP"
check "escape 2: primed in Pod Q, then handed over and exited" \
  sh -c "test $RC = 0 && grep -q PRIMED '$T/E2.out' && grep -q HANDED '$T/E2.out'"
_pids+=("$(sed -n 's/.*to pid \([0-9]*\).*/\1/p' "$T/E2.out")")
kill -CONT "$SCHED_PID"
check "escape 2 (pid last seen in Pod Q): the most restrictive limits (15 %, 256Mi), not Q's looser ones" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=15 mem_limit=$((256 * MiB))\$" "$T/E2.out"
j=$("$CTL" --json)
check "status: tenant unknown, source pid-history, Pod team-q/victim" \
  jpy "$j" "[(c['tenant']['kind'], c['tenant']['source'], c['pod']['name']) for c in j['clients'] if c['claimed_name']=='esc2'][0]==('unknown','pid-history','victim')"

# Identity is read once, at accept: Pod P's client whose cgroup file later
# names Pod Q, and which then goes on talking (lock, release), stays in P.
fcpod R "$(cg_systemd_v2 "$UP")" --gpu-uuid GPU-id \
  --script "wait SET_LIMITS 10s;until $T/go-R;lock;hold 10ms;release;stay"
wait_ev 5 R ' SET_LIMITS '
cg_systemd_v2 "$UQ" >"$PROC/$PID_R/cgroup"
touch "$T/go-R"
check "R (cgroup now names Pod Q) locks and releases" wait_event 5 lock_released pid="$PID_R"
c=$(client_of "$PID_R")
check "... and is still in Pod P, tenant from its cgroup" \
  jpy "$c" "j['pod']['uid']=='$UP' and j['tenant']['kind']=='pod' and j['tenant']['source']=='cgroup'"
check "... its one SET_LIMITS Pod P's (30 %, 256Mi)" \
  sh -c "test \"\$(grep -c ' SET_LIMITS ' '$T/R.out')\" = 1 && grep -q 'SET_LIMITS gpu=0 core_limit=30 mem_limit=$((256 * MiB))\$' '$T/R.out'"
check "scheduler healthy" sched_alive

# The fallback without SO_PEERPIDFD: a second scheduler with the shim.
kill -TERM "$SCHED_PID"; wait_exit 5 "$SCHED_PID"
shim_preload "$B/tests/security/no_peerpidfd.so"
# (No unknown-tenant limits configured: the defaults apply.)
bg env -u NVSHARE_UNKNOWN_TENANT_CORE_LIMIT -u NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT \
  LD_PRELOAD="$SHIM_PRELOAD" ASAN_OPTIONS="$SHIM_ASAN_OPTIONS" "$B/nvshare-scheduler" \
  --no-nvml --no-kube --proc-root "$PROC" >>"$T/fallback.log" 2>&1
SCHED_PID=${_pids[-1]}
wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || not_ok "fallback scheduler starts"
# Operator-facing start-up output (written before the sockets exist).
check "start-up warning: identities read from the --proc-root directory, not /proc, for tests only" \
  grep -qF "peer identities are read from $PROC, not /proc" "$T/fallback.log"
fcpod K "$(cg_systemd_v2 "$UP")" --gpu-uuid GPU-id --script stay
c=$(client_of "$PID_K")
check "fallback: a Pod client is still identified from its cgroup (no pidfd)" \
  jpy "$c" "j['pod']['uid']=='$UP' and j['tenant']=={'kind':'pod','source':'cgroup','pidfd':False}"
"$PY" "$NVS_ROOT/tests/security/escape.py" "$PROC" "$(cg_systemd_v2 "$UQ")" \
  "$NVSHARE_SOCK_DIR/scheduler.sock" "$SCHED_PID" -- "$FC" --name esc3 --gpu-uuid GPU-id \
  --script 'wait SET_LIMITS 10s;stay' >"$T/E3.out" 2>&1 &
EP=$!
wait_exit 10 "$EP"
_pids+=("$(sed -n 's/.*to pid \([0-9]*\).*/\1/p' "$T/E3.out")")
kill -CONT "$SCHED_PID"
check "fallback: connect-then-exit is still an unknown tenant, with the default limits (10 %, 1Gi)" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=10 mem_limit=$((1024 * MiB))\$" "$T/E3.out"
# A pid last seen in a Pod the scheduler does not know (no Pod watch here):
# the unknown-tenant limits, not that Pod's (it has none known).
"$PY" "$NVS_ROOT/tests/security/escape.py" "$PROC" "$(cg_systemd_v2 "$UQ")" \
  "$NVSHARE_SOCK_DIR/scheduler.sock" "$SCHED_PID" --prime -- "$FC" --name esc5 --gpu-uuid GPU-id \
  --script 'wait SET_LIMITS 10s;stay' >"$T/E5.out" 2>&1 &
EP=$!
wait_exit 10 "$EP"
_pids+=("$(sed -n 's/.*to pid \([0-9]*\).*/\1/p' "$T/E5.out")")
kill -CONT "$SCHED_PID"
check "escape 5 (pid last seen in a Pod the watch does not know): unknown-tenant limits (10 %, 1Gi)" \
  wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=10 mem_limit=$((1024 * MiB))\$" "$T/E5.out"
j=$("$CTL" --json)
check "status: tenant unknown, source pid-history" \
  jpy "$j" "[(c['tenant']['kind'], c['tenant']['source']) for c in j['clients'] if c['claimed_name']=='esc5'][0]==('unknown','pid-history')"
check "fallback scheduler healthy" sched_alive

# Lock turns: every unknown peer is one tenant. A serialized GPU (mode on)
# and no compute limit for unknown tenants, so that only the tenant
# rotation orders the grants. Pod P's H holds the lock while unknown U1,
# unknown U2 and Pod Q's Q1 queue in that order; then the rotation gives
# U1, Q1 (the unknown tenant was just served), U2. Two unknown tenants
# would give U1, U2, Q1.
kill -TERM "$SCHED_PID"; wait_exit 5 "$SCHED_PID"
start_scheduler --no-nvml --no-kube --mode on --tq 30s --proc-root "$PROC" \
  --unknown-tenant-core-limit 100 || not_ok "scheduler for the lock turns starts"
fcpod H "$(cg_systemd_v2 "$UP")" --gpu-uuid GPU-turn --script "lock;until $T/go-H;release;stay"
wait_event 5 lock_ok pid="$PID_H" || not_ok "H holds the lock"
for n in U1 U2; do
  fc "$n" --name "$n" --gpu-uuid GPU-turn --script 'lock;hold 20ms;release;stay'
  wait_event 5 req_lock pid="$(eval echo "\$PID_$n")" || not_ok "$n queued"
done
fcpod Q1 "$(cg_systemd_v2 "$UQ")" --gpu-uuid GPU-turn --script 'lock;hold 20ms;release;stay'
wait_event 5 req_lock pid="$PID_Q1" || not_ok "Q1 queued"
check "U1 is an unknown tenant (hello event)" has_event hello pid="$PID_U1" tenant='"unknown"'
check "U2 is an unknown tenant (hello event)" has_event hello pid="$PID_U2" tenant='"unknown"'
touch "$T/go-H"
# turns: the order in which U1, U2 and Q1 were granted the lock.
turns() { event_field pid lock_ok | grep -xE "$PID_U1|$PID_U2|$PID_Q1" | tr '\n' ' '; }
three_turns() { [ "$(turns | wc -w)" = 3 ]; }
wait_for 5 three_turns
check "unknown peers share one tenant's turns: U1, Q1, U2 ($(turns))" \
  test "$(turns)" = "$PID_U1 $PID_Q1 $PID_U2 "

# A scheduler outside its clients' PID namespace (no hostPID) sees every
# peer as pid 0: an unknown tenant, with the default unknown-tenant limits,
# refused on the admin socket.
kill -TERM "$SCHED_PID"; wait_exit 5 "$SCHED_PID"
if ! unshare --pid --fork --kill-child true 2>/dev/null; then
  ok "PID namespace # SKIP unshare --pid not permitted here"
else
  bg env -u NVSHARE_UNKNOWN_TENANT_CORE_LIMIT -u NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT \
    unshare --pid --fork --kill-child "$B/nvshare-scheduler" --no-nvml --no-kube \
    --proc-root "$PROC" >>"$T/pidns.log" 2>&1
  SCHED_PID=${_pids[-1]}
  wait_sched_sockets || not_ok "scheduler in its own PID namespace starts"
  fc NS --name nsclient --gpu-uuid GPU-ns --script 'wait SET_LIMITS 10s;stay'
  check "PID namespace: the client is seen as pid 0, an unknown tenant (hello event)" \
    wait_event 5 hello pid=0 name='"nsclient"' tenant='"unknown"'
  check "... with the default unknown-tenant limits (10 %, 1Gi)" \
    wait_for 5 grep -q "SET_LIMITS gpu=0 core_limit=10 mem_limit=$((1024 * MiB))\$" "$T/NS.out"
  out=$("$CTL" --json 2>&1); rc=$?
  check "... and nvsharectl from outside is refused on the admin socket, saying why" \
    sh -c 'test "$1" = 1 && echo "$2" | grep -q "peer outside the scheduler.s PID namespace"' sh "$rc" "$out"
  check "scheduler in its own PID namespace still runs" kill -0 "$SCHED_PID"
fi
echo "1..$_tap_n"
