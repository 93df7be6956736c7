#!/usr/bin/env bash
# Hostile load, connections (issue 17): one tenant (uid 65534) may hold
# NVSHARE_MAX_CONNS_PER_TENANT connections; beyond that it is refused (an
# event, a rate-limited log line) while another tenant still registers. A
# client-socket peer that sends no HELLO within the handshake deadline is
# closed; an nvsharectl on the admin socket that takes longer is still
# answered. The settings are validated strictly.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"

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
  hostile R register 20 --hold 30
  check "20 connections of one tenant: the surplus refused (event)" \
    wait_event 10 conn_refused reason='"tenant-limit"' uid=65534
  check "... with the tenant and the limit in the event" \
    has_event conn_refused reason='"tenant-limit"' tenant='"uid:65534"' limit=8
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
