#!/usr/bin/env bash
# nvs-test: slow (hostile load: connection caps and handshake deadlines; t_hog is the fast tier's hostile-load test)
# Hostile load, connections (issue 17): one tenant (uid 65534) may hold
# NVSHARE_MAX_CONNS_PER_TENANT connections; beyond that it is refused (an
# event, a rate-limited log line) while another tenant still registers. A
# client-socket peer that sends no HELLO within the handshake deadline is
# closed; an nvsharectl on the admin socket that takes longer is still
# answered. The settings are validated strictly. The refusal events are
# rate-limited like their log lines. The tenant is the Pod, the uid outside
# Kubernetes, or one bucket for every unknown peer, and the admin socket is
# not counted (identities from a fake proc root).
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
UP=0a1b2c3d-0000-4000-8000-0000000000c1

# Strict settings: a bad value names the setting and the range, exit 2.
"$B/nvshare-scheduler" --max-conns-per-tenant lots >"$T/bad1" 2>&1
check "--max-conns-per-tenant lots is refused (exit 2)" [ $? = 2 ]
check "... naming the flag and the range" grep -q -- '--max-conns-per-tenant.*0\.\.' "$T/bad1"
NVSHARE_HANDSHAKE_TIMEOUT_MS=5 "$B/nvshare-scheduler" >"$T/bad2" 2>&1
check "NVSHARE_HANDSHAKE_TIMEOUT_MS=5 is refused (exit 2)" [ $? = 2 ]
check "... naming the variable" grep -q 'NVSHARE_HANDSHAKE_TIMEOUT_MS' "$T/bad2"
NVSHARE_CONN_BUFFER_BUDGET=1k "$B/nvshare-scheduler" >"$T/bad3" 2>&1
check "NVSHARE_CONN_BUFFER_BUDGET=1k is refused (exit 2)" [ $? = 2 ]
"$B/nvshare-scheduler" --log-rate -1 >"$T/bad4" 2>&1
check "--log-rate -1 is refused (exit 2)" [ $? = 2 ]
check "--help lists the bounds" sh -c "'$B/nvshare-scheduler' --help | grep -q NVSHARE_MAX_CONNS_PER_TENANT"

# uid_clients UID: how many registered clients of that uid.
uid_clients() {
  "$CTL" --json | "$HPY" -c 'import json,sys; print(sum(1 for c in json.load(sys.stdin)["clients"] if c["uid"] == int(sys.argv[1])))' "$1"
}

uid_clients_are() { [ "$(uid_clients "$1")" = "$2" ]; }

start_scheduler --no-nvml --mode on --max-conns-per-tenant 8 --handshake-timeout-ms 1000 ||
  { not_ok "scheduler starts"; exit 1; }
check "status shows the bounds" sh -c "'$CTL' --json | grep -qF '\"max_conns_per_tenant\":8'"

if [ ${#NOBODY[@]} = 0 ]; then
  ok "tenant cap # skip cannot run the attacker as another uid (not root or no setpriv)"
else
  hostile R register 60 --hold 30
  check "60 connections of one tenant: the surplus refused (event)" \
    wait_event 10 conn_refused reason='"tenant-limit"' uid=65534
  check "... with the tenant and the limit in the event" \
    has_event conn_refused reason='"tenant-limit"' tenant='"uid:65534"' limit=8
  # All 52 refusals come within a second or two: at 10 events a second
  # per tenant, fewer events than refusals.
  refused=$("$CTL" --json | "$HPY" -c 'import json,sys; print(json.load(sys.stdin)["connections"]["refused_tenant_limit"])')
  nev=$(count_events conn_refused reason='"tenant-limit"' uid=65534)
  check "the refusal events are rate-limited: $nev events for $refused refusals" \
    [ "${refused:-0}" -ge 52 -a "$nev" -lt "${refused:-0}" ]
  fc H --gpu-uuid GPU-c --script 'lock;hold 10ms;release'
  check "another tenant still registers and locks" wait_exit 10 "$PID_H"
  check "... exit 0" [ "$RC" = 0 ]
  n=$(uid_clients 65534)
  check "the attacker holds at most 8 registered clients ($n)" [ "${n:-99}" -le 8 ]
  kill "$PID_R" 2>/dev/null
  check "its connections go with it" wait_for 10 uid_clients_are 65534 0
fi

# Handshake deadline: silent connections (as many as the cap lets in, and
# fewer than the log rate: each is evented) are closed after 1 s.
hostile I idle 8 --hold 30
check "silent connections closed at the deadline (handshake-timeout)" \
  wait_events 10 8 conn_closed kind='"new"' reason='"handshake-timeout"'
# A registered client is never subject to it.
fc K --gpu-uuid GPU-c --script 'hold 2s;lock;hold 10ms;release'
check "a client that said HELLO is not cut by the deadline" wait_exit 10 "$PID_K"
check "... exit 0" [ "$RC" = 0 ]
# The admin socket has no deadline: a slow nvsharectl is answered.
"$HPY" "$HOSTILE" "$NVSHARE_ADMIN_SOCK_DIR/admin.sock" ctl-late 2 >"$T/late.out" 2>&1
diag "$(cat "$T/late.out")"
check "the admin socket answers a request sent after 2 s" grep -qE 'REPLY status=0 bytes=[1-9]' "$T/late.out"
check "scheduler alive" sched_alive

# Who the tenant is, with a cap of 2: a Pod (its cgroup), the uid outside
# Kubernetes, one bucket for every unknown peer (no cgroup file: the
# scheduler cannot tell who it is); nvsharectl on the admin socket is not
# counted in its uid's bucket.
kill -TERM "$SCHED_PID"; wait_exit 10 "$SCHED_PID"
start_scheduler --no-nvml --no-kube --proc-root "$PROC" --max-conns-per-tenant 2 ||
  { not_ok "scheduler with a fake proc root starts"; exit 1; }
for n in P1 P2 P3; do fcpod "$n" "$(cg_systemd_v2 "$UP")" --gpu-uuid GPU-c --script stay; done
check "a Pod's third connection is refused: its tenant is the Pod" \
  wait_event 5 conn_refused reason='"tenant-limit"' pid="$PID_P3" tenant="\"pod:$UP\"" limit=2
for n in N1 N2 N3; do fc "$n" --gpu-uuid GPU-c --script stay; done
check "the third unknown peer is refused: every unknown peer is one tenant" \
  wait_event 5 conn_refused reason='"tenant-limit"' pid="$PID_N3" tenant='"unknown"' limit=2
HOST_CG=0::/user.slice/user-0.slice/session-1.scope
for n in H1 H2; do fcpod "$n" "$HOST_CG" --gpu-uuid GPU-c --script stay; done
both_hosts() {
  has_event hello pid="$PID_H1" tenant="\"uid:$(id -u)\"" && has_event hello pid="$PID_H2" tenant="\"uid:$(id -u)\""
}
check "uid $(id -u) holds two connections (hello events)" both_hosts
check "the admin socket is not counted: nvsharectl of uid $(id -u) is answered" sh -c "'$CTL' --json >/dev/null"
fcpod H3 "$HOST_CG" --gpu-uuid GPU-c --script stay
check "... while a third client-socket connection of uid $(id -u) is refused" \
  wait_event 5 conn_refused reason='"tenant-limit"' pid="$PID_H3" tenant="\"uid:$(id -u)\"" limit=2
check "scheduler alive" sched_alive
