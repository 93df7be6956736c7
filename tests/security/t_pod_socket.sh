#!/usr/bin/env bash
# nvs-test: slow (the identity race 1,000 times per cgroup layout; t_dp_podsock and t_pod_ceiling are the fast tier's)
# Pod sockets (issue 31 item 1, docs/security.md "Pod sockets"): the
# socket a client connects on is its identity.
#  - A binding file (<sock-dir>/bindings/<key>.json, what the device plugin
#    writes) makes the scheduler listen on <sock-dir>/pods/<key>/; a client
#    there is in the binding's Pod whatever its process looks like: no
#    cgroup file, another Pod's cgroup, or exiting while it connects.
#  - The identity race of cgroup v1 (connect, hand the socket over, exit:
#    the exiting process's cgroup reads "/" while its pidfd still answers;
#    3e0f2f1 made that a host tenant with no limits) is run 1,000 times on
#    each layout, v1 and v2, deterministically (the scheduler is stopped
#    across the exit: tests/security/race.py): on the Pod socket every try
#    gets Pod P's own limits; on the shared socket every try is an unknown
#    tenant with the most restrictive limits on the node (Pod Q's are the
#    smallest here), never none.
#  - A binding changed to another Pod moves new connections, not old ones;
#    a removed binding closes its socket; unsafe or malformed binding files
#    are refused (symlink, FIFO, writable by others, not JSON, bad names).
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$(dirname "$0")/sec_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
UP=0a1b2c3d-0000-4000-8000-0000000000c1
UQ=0a1b2c3d-0000-4000-8000-0000000000d2
MiB=$((1 << 20))
pods_api "$UP:team-p/trainer:5:256" "$UQ:team-q/small:3:128" || exit 1
start_kube_scheduler || { not_ok "scheduler starts"; exit 1; }
wait_event 5 k8s_list pods=2 || not_ok "scheduler listed the pods"
BD=$NVSHARE_SOCK_DIR/bindings
check "the bindings directory is the scheduler's, mode 0700" \
  test "$(stat -c '%a %u' "$BD")" = "700 $(id -u)"

# bind KEY NS NAME [UID]: what a binder does, write and rename.
bind() {
  printf '{"namespace":"%s","name":"%s"%s,"origin":"test"}\n' "$2" "$3" "${4:+,\"uid\":\"$4\"}" \
    >"$BD/.$1.tmp" && mv "$BD/.$1.tmp" "$BD/$1.json"
}
K1=0123456789abcdef
bind "$K1" team-p trainer
S1=$NVSHARE_SOCK_DIR/pods/$K1/scheduler.sock
mode_of() { stat -c %a "$1" 2>/dev/null; }
check "a binding makes a Pod socket (0666) in pods/<key>/" \
  wait_for 5 sh -c "test -S '$S1' && test \"\$(stat -c %a '$S1')\" = 666"
check "... announced (pod_socket event, key and Pod)" \
  wait_event 5 pod_socket key="\"$K1\"" namespace='"team-p"' pod='"trainer"'

# A client on P's socket with no cgroup file at all (on the shared socket:
# an unknown tenant): P's limits, by the socket.
NVSHARE_SOCK_DIR=$NVSHARE_SOCK_DIR/pods/$K1 fc NOCG --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "no cgroup file, on P's socket: P's limits (5 %, 256Mi)" \
  wait_for 5 limits_are NOCG 5 $((256 * MiB))
client_of() { "$PY" -c 'import json,sys; print(json.dumps([c for c in json.loads(sys.argv[1])["clients"] if c["pid"]==int(sys.argv[2])][0]))' "$("$CTL" --json)" "$1"; }
c=$(client_of "$PID_NOCG")
check "status: tenant pod, source socket, Pod team-p/trainer" \
  jpy "$c" "j['tenant']['kind']=='pod' and j['tenant']['source']=='socket' and j['pod']['name']=='trainer'"
# A process of Pod Q that reached P's socket: the socket decides (logged).
NVSHARE_SOCK_DIR=$NVSHARE_SOCK_DIR/pods/$K1 fcpod QONP "$(cg_systemd_v2 "$UQ")" --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "a process whose cgroup names Pod Q, on P's socket: P's limits" \
  wait_for 5 limits_are QONP 5 $((256 * MiB))
check "... and the disagreement is logged" \
  wait_log 5 "$T/scheduler.log" "connected on the socket of pod team-p/trainer .* but its cgroup names pod uid $UQ"

# The race, 1,000 times a layout, on the Pod socket and on the shared one.
race() { "$PY" "$NVS_ROOT/tests/security/race.py" "$1" "$PROC" "$2" "$UP" "$SCHED_PID" 1000 >"$T/race-$3.out" 2>&1; }
for layout in v1 v2; do
  race "$S1" "$layout" "pod-$layout"
  diag "Pod socket, $layout: $(tr '\n' ' ' <"$T/race-pod-$layout.out")"
  check "race on the Pod socket, cgroup $layout: Pod P's own limits in 1000 of 1000 tries" \
    grep -qx "LIMITS core=5 mem=$((256 * MiB)) count=1000" "$T/race-pod-$layout.out"
  race "$NVSHARE_SOCK_DIR/scheduler.sock" "$layout" "shared-$layout"
  diag "shared socket, $layout: $(tr '\n' ' ' <"$T/race-shared-$layout.out")"
  check "race on the shared socket, cgroup $layout: the most restrictive limits on the node (Q's 3 %, 128Mi) in 1000 of 1000 tries, never none" \
    grep -qx "LIMITS core=3 mem=$((128 * MiB)) count=1000" "$T/race-shared-$layout.out"
done
check "the shared socket's racers were unknown tenants (hello events)" \
  has_event hello name='"race"' tenant='"unknown"'
check "scheduler alive after 4,000 races" sched_alive

# Another Pod bound to the same key (its devices allocated again): new
# connections are Q's; the one connected before stays P's.
bind "$K1" team-q small
wait_event 5 pod_socket key="\"$K1\"" namespace='"team-q"' || not_ok "the rebinding is announced"
NVSHARE_SOCK_DIR=$NVSHARE_SOCK_DIR/pods/$K1 fc REB --gpu-uuid GPU-id --script 'wait SET_LIMITS 10s;stay'
check "rebinding to Pod Q: a new client there gets Q's limits (3 %, 128Mi)" \
  wait_for 5 limits_are REB 3 $((128 * MiB))
c=$(client_of "$PID_NOCG")
check "... and the client connected before is still in Pod P" jpy "$c" "j['pod']['name']=='trainer'"

# Removed: the socket goes.
rm "$BD/$K1.json"
check "a removed binding closes its socket" wait_for 5 sh -c "! test -e '$S1'"
check "... announced (pod_socket_closed)" wait_event 5 pod_socket_closed key="\"$K1\""

# Unsafe or malformed binding files: refused, no socket.
n0=$(count_events pod_binding_refused)
ln -s "$T/pods.json" "$BD/1111111111111111.json"
mkfifo "$BD/2222222222222222.json"
bind 3333333333333333 team-p trainer && chmod 0666 "$BD/3333333333333333.json"
printf 'not json' >"$BD/4444444444444444.json"
bind 5555555555555555 'Team P' 'a/b'
bind 6666666666666666 team-p trainer not-a-uid
check "six unsafe or malformed binding files: each refused (pod_binding_refused)" \
  wait_for 5 sh -c "[ \$(grep -c '\"event\":\"pod_binding_refused\"' '$NVSHARE_EVENTS') -ge $((n0 + 6)) ]"
check "... and none of them has a socket" \
  sh -c "! ls '$NVSHARE_SOCK_DIR/pods/'*/scheduler.sock 2>/dev/null"
check "... the FIFO did not stall the scheduler" sched_alive
check_rss "1000 races a layout, Pod sockets, refused bindings"
