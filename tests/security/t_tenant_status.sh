#!/usr/bin/env bash
# Tenant privacy (docs/security.md): the status on the client socket
# (nvsharectl --tenant) shows the caller's own tenant only - its Pod's
# clients, or outside Kubernetes its uid's - plus GPU facts that name no
# one; a caller the scheduler cannot identify sees no client. The admin
# status shows everyone.
# shellcheck disable=SC1091,SC2016,SC2119,SC2154 # libs by path; inner sh -c scripts; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$(dirname "$0")/sec_lib.sh"
UA=0a1b2c3d-0000-4000-8000-0000000000aa
UB=0a1b2c3d-0000-4000-8000-0000000000bb
if ! mkcerts; then not_ok "openssl makes a CA and a server certificate"; exit 1; fi
printf 'token-T\n' >"$T/token"
cat >"$T/pods.json" <<EOF2
[{"uid":"$UA","name":"trainer","namespace":"team-a","annotations":{"nvshare.com/gpu-core-limit":"40"}},
 {"uid":"$UB","name":"secret-infer","namespace":"team-b","annotations":{"nvshare.com/gpu-memory-limit":"2Gi"}}]
EOF2
start_api token-T "$T/pods.json" || { not_ok "fake API server starts"; exit 1; }
start_kube_scheduler --mode on || { not_ok "scheduler starts"; exit 1; }
wait_event 5 k8s_list pods=2 || not_ok "scheduler listed the pods"

fcpod A1 "$(cg_systemd_v2 "$UA")" --name a-one --gpu-uuid GPU-t --alloc 1Gi --script 'lock;stay'
fcpod A2 "$(cg_cgroupfs_v1 "$UA")" --name a-two --gpu-uuid GPU-t --alloc 1Gi --script stay
fcpod B1 "$(cg_systemd_v2 "$UB")" --name b-one --gpu-uuid GPU-t --alloc 3Gi --script 'req;stay'
fcpod H "0::/user.slice/user-0.slice/session-9.scope" --name host-job --gpu-uuid GPU-t --script stay
wait_ev 5 B1 'SENT REQ_LOCK'

ja=$(pod_ctl "$UA" --tenant --json); rc=$?
check "Pod A reads its tenant status" test "$rc" = 0
check "Pod A sees exactly its two clients" test "$(pids_of "$ja")" = "$(sorted_pids "$PID_A1" "$PID_A2")"
check "... labelled as a tenant view of Pod A" \
  jpy "$ja" "j['view']=='tenant' and j['tenant']=={'kind':'pod','pod_uid':'$UA'}"
check "... with its own limits and Pod name" \
  jpy "$ja" "all(c['pod']['name']=='trainer' and c['gpus'][0]['limits']['core_limit']==40 for c in j['clients'])"
check "... and its own GPU use and lock state" \
  jpy "$ja" "all({'allocated','state'} <= set(c['gpus'][0]) for c in j['clients'])"
check "... and nothing of Pod B or the host client anywhere (uid, names, pids)" \
  sh -c '! echo "$0" | grep -qE "$1|secret-infer|team-b|b-one|host-job|\"pid\":($2|$3)[,}]"' "$ja" "$UB" "$PID_B1" "$PID_H"
check "GPU facts name no one: no holder, queue, allocation, client count" \
  jpy "$ja" "j['gpus'] and all(set(g) == {'index','uuid','name','mode','serialized','tq_ms','total_memory'} for g in j['gpus'])"
check "no scheduler-wide counters (connections, pid, defaults, kube, unmanaged processes)" \
  jpy "$ja" "not ({'connections','pid','defaults','kube','admin_socket','unmanaged'} & set(j))"

jb=$(pod_ctl "$UB" --tenant --json)
check "Pod B sees only its client" test "$(pids_of "$jb")" = "$PID_B1"
check "... and nothing of Pod A" sh -c '! echo "$0" | grep -qE "$1|trainer|team-a|a-one|a-two"' "$jb" "$UA"

jh=$("$CTL" --tenant --json)
check "a host process of uid $(id -u) sees only the host client of its uid" \
  test "$(pids_of "$jh")" = "$PID_H"
check "... labelled as the tenant of uid $(id -u)" \
  jpy "$jh" "j['tenant']=={'kind':'uid','uid':$(id -u)}"

ju=$(unknown_ctl --tenant --json)
check "an unidentifiable caller sees no client" \
  jpy "$ju" "j['clients']==[] and j['tenant']['kind']=='unknown'"

jall=$("$CTL" --json)
check "the admin status shows all four clients" \
  test "$(pids_of "$jall")" = "$(sorted_pids "$PID_A1" "$PID_A2" "$PID_B1" "$PID_H")"
# (A1 is limited to 40 %: the lock may have passed to B1.)
check "... and the GPU's holder, whichever tenant it is" \
  jpy "$jall" "j['view']=='admin' and j['gpus'][0]['holder']['pid'] in ($PID_A1, $PID_B1)"

table=$(pod_ctl "$UA" --tenant)
check "nvsharectl --tenant renders the tenant view (table)" \
  sh -c 'echo "$0" | grep -q "tenant view for Pod $1" && echo "$0" | grep -q a-one && ! echo "$0" | grep -q b-one' "$table" "$UA"
check "scheduler healthy" sched_alive
echo "1..$_tap_n"
