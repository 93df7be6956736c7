#!/usr/bin/env bash
# The ceiling of a Pod socket's binding (scheduler/podsock.h; what the DRA
# driver writes from a claim's consumed capacity, docs/dra.md): every
# client accepted on that socket gets limits no higher than it.
#  - no other source: the ceiling is the limit (30 %, 512Mi);
#  - the Pod's annotations lower it (20 %) but do not raise it (90 % ->
#    30 %), live (MODIFIED) as well as at connect; the client's own
#    environment (HELLO) cannot raise it;
#  - nvsharectl --set-client above it (all GPUs, and one GPU with -g) is
#    capped, and the answer says so; below it, it applies;
#  - a binding that names no Pod (a claim several Pods share) keeps the
#    cgroup's identity and adds the ceiling;
#  - bad ceilings are refused: core 0, 101, "30", 2.5, memory 0 or
#    negative, a binding with neither a Pod nor a ceiling, a uid without a
#    name.
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$(dirname "$0")/sec_lib.sh"
UP=0a1b2c3d-0000-4000-8000-0000000000e1
UQ=0a1b2c3d-0000-4000-8000-0000000000e2
MiB=$((1 << 20))
pods_api "$UP:team-p/trainer:20:256" "$UQ:team-q/shared:90:4096" || exit 1
start_kube_scheduler || { not_ok "scheduler starts"; exit 1; }
wait_event 5 k8s_list pods=2 || not_ok "scheduler listed the pods"
BD=$NVSHARE_SOCK_DIR/bindings

# bind KEY JSON: what the DRA driver does, write and rename.
bind() { printf '%s\n' "$2" >"$BD/.$1.tmp" && mv "$BD/.$1.tmp" "$BD/$1.json"; }
client_of() { "$PY" -c 'import json,sys; print(json.dumps([c for c in json.loads(sys.argv[1])["clients"] if c["pid"]==int(sys.argv[2])][0]))' "$("$CTL" --json)" "$1"; }
sock() { echo "$NVSHARE_SOCK_DIR/pods/$1"; }

# Pod X has no annotation limits: the ceiling alone.
UX=0a1b2c3d-0000-4000-8000-0000000000e3
api_cmd "{\"op\":\"add\",\"pod\":{\"uid\":\"$UX\",\"name\":\"plain\",\"namespace\":\"team-x\"}}"
wait_for 5 grep -q "SENT ADDED uid=$UX" "$T/api.out" || not_ok "the fake API sent Pod X"
K0=00000000000000a0
bind $K0 "{\"namespace\":\"team-x\",\"name\":\"plain\",\"uid\":\"$UX\",\"origin\":\"dra\",\"core_limit\":30,\"memory_limit\":536870912}"
check "a binding with a ceiling makes a Pod socket, announced with the ceiling" \
  wait_event 5 pod_socket key="\"$K0\"" namespace='"team-x"' pod='"plain"' core_limit=30 memory_limit=536870912
NVSHARE_SOCK_DIR=$(sock $K0) fc ALONE --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "no other limit: the ceiling is the limit (30 %, 512Mi)" wait_for 5 limits_are ALONE 30 $((512 * MiB))
c=$(client_of "$PID_ALONE")
check "status: ceiling {30, 512Mi}" jpy "$c" "j['ceiling']=={'core_limit':30,'mem_limit':536870912}"
NVSHARE_SOCK_DIR=$(sock $K0) fc ENV --core-limit 80 --mem-limit 2Gi --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "the client's environment (80 %, 2Gi) does not raise it" wait_for 5 limits_are ENV 30 $((512 * MiB))

# Pod P (annotations 20 %, 256Mi) under a ceiling of 30 %, 512Mi: the
# annotations are lower, they apply.
K1=00000000000000b1
bind $K1 "{\"namespace\":\"team-p\",\"name\":\"trainer\",\"uid\":\"$UP\",\"origin\":\"dra\",\"core_limit\":30,\"memory_limit\":536870912}"
wait_event 5 pod_socket key="\"$K1\"" || not_ok "P's binding makes a socket"
NVSHARE_SOCK_DIR=$(sock $K1) fc P1 --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "annotations below the ceiling (20 %, 256Mi) apply" wait_for 5 limits_are P1 20 $((256 * MiB))
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"90\",\"nvshare.com/gpu-memory-limit\":\"8Gi\"}}"
check "annotations raised live to 90 %, 8Gi: held at the ceiling (30 %, 512Mi)" \
  wait_for 5 limits_are P1 30 $((512 * MiB))
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"10\",\"nvshare.com/gpu-memory-limit\":\"128\"}}"
check "annotations lowered live to 10 %, 128Mi: they apply" wait_for 5 limits_are P1 10 $((128 * MiB))

# nvsharectl, as the node's admin.
out=$("$CTL" --set-client "$PID_P1" --core-limit 70 --memory-limit 4Gi 2>&1); rc=$?
check "--set-client above the ceiling: accepted, and the answer says it was capped ($out)" \
  sh -c '[ "$0" = 0 ] && echo "$1" | grep -q "capped at the ceiling of its DRA claim"' "$rc" "$out"
check "... the client gets the ceiling (30 %, 512Mi), not 70 %, 4Gi" wait_for 5 limits_are P1 30 $((512 * MiB))
out=$("$CTL" --set-client "$PID_P1" -g 0 --core-limit 95 2>&1); rc=$?
check "--set-client -g 0 above the ceiling: capped too ($out)" \
  sh -c '[ "$0" = 0 ] && echo "$1" | grep -q "capped"' "$rc" "$out"
check "... core 30 %, not 95 %" test "$(event_field core_limit set_limits pid="$PID_P1" | tail -1)" = 30
out=$("$CTL" --set-client "$PID_P1" --core-limit 15 --memory-limit 300 2>&1); rc=$?
check "--set-client below the ceiling applies (15 %, 300Mi), no word of a cap" \
  sh -c '[ "$0" = 0 ] && ! echo "$1" | grep -q capped' "$rc" "$out"
check "... the client gets 15 %, 300Mi" wait_for 5 limits_are P1 15 $((300 * MiB))

# A binding with no Pod (a shared claim): Q's process, identified by its
# cgroup, gets Q's annotations (90 %, 4Gi) capped by the ceiling (40 %, 1Gi).
K2=00000000000000c2
bind $K2 '{"namespace":"team-q","origin":"dra","claim":"team-q/shared-gpu","core_limit":40,"memory_limit":1073741824}'
check "a binding with no Pod but a ceiling makes a socket (pod \"\")" \
  wait_event 5 pod_socket key="\"$K2\"" namespace='"team-q"' pod='""' core_limit=40
NVSHARE_SOCK_DIR=$(sock $K2) fcpod QS "$(cg_systemd_v2 "$UQ")" --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "shared claim: Q's process gets Q's annotations capped (40 %, 1Gi)" \
  wait_for 5 limits_are QS 40 $((1024 * MiB))
c=$(client_of "$PID_QS")
check "... identified by its cgroup (tenant pod, source cgroup, Pod team-q/shared)" \
  jpy "$c" "j['tenant']['kind']=='pod' and j['tenant']['source']=='cgroup' and j['pod']['name']=='shared'"
NVSHARE_SOCK_DIR=$(sock $K2) fc QX --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
# (Unknown: the strictest on the node, P's 10 %, 128Mi; within the ceiling.)
check "shared claim, a process whose cgroup cannot be read: an unknown tenant's limits (10 %, 128Mi)" \
  wait_for 5 limits_are QX 10 $((128 * MiB))

# Bad ceilings: refused, no socket.
n0=$(count_events pod_binding_refused)
bind 1000000000000001 '{"namespace":"team-p","name":"trainer","core_limit":0}'
bind 1000000000000002 '{"namespace":"team-p","name":"trainer","core_limit":101}'
bind 1000000000000003 '{"namespace":"team-p","name":"trainer","core_limit":"30"}'
bind 1000000000000004 '{"namespace":"team-p","name":"trainer","core_limit":2.5}'
bind 1000000000000005 '{"namespace":"team-p","name":"trainer","memory_limit":0}'
bind 1000000000000006 '{"namespace":"team-p","name":"trainer","memory_limit":-1048576}'
bind 1000000000000007 '{"namespace":"team-p","origin":"dra"}'
bind 1000000000000008 "{\"namespace\":\"team-p\",\"uid\":\"$UP\",\"core_limit\":30}"
check "eight bad ceilings or Pod-less bindings: each refused (pod_binding_refused)" \
  wait_for 5 sh -c "[ \$(grep -c '\"event\":\"pod_binding_refused\"' '$NVSHARE_EVENTS') -ge $((n0 + 8)) ]"
check "... with the reason named (core_limit)" \
  grep -qF '"key":"1000000000000002","why":"\"core_limit\" is not an integer percent 1..100"' "$NVSHARE_EVENTS"
check "... and none of them has a socket" \
  sh -c "! ls '$NVSHARE_SOCK_DIR/pods/1000000000000'*/scheduler.sock 2>/dev/null"
check "scheduler alive" sched_alive
echo "1..$_tap_n"
