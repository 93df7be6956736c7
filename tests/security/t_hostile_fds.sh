#!/usr/bin/env bash
# Hostile load, descriptors (issue 17): the scheduler runs with
# nofile=1024 and uid 65534 opens 1,100 connections that never speak (the
# per-tenant cap lifted, so that descriptors are what runs out). While
# they hold every descriptor, nvsharectl is still answered (the admin
# socket is served from the descriptor reserve) and an honest client that
# connects meanwhile waits in the backlog, not refused, and registers once
# the handshake deadline (3 s here) has closed the silent ones.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"

if ! command -v prlimit >/dev/null; then
  ok "descriptor exhaustion # skip no prlimit"
  exit 0
fi
bg prlimit --nofile=1024 "$B/nvshare-scheduler" --no-nvml --mode on --max-conns-per-tenant 0 \
  --handshake-timeout-ms 3000 >>"$T/scheduler.log" 2>&1
SCHED_PID=${_pids[-1]}
wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || { not_ok "scheduler starts"; exit 1; }
check "scheduler runs with 1024 descriptors" \
  sh -c "grep -qE 'Max open files +1024 ' /proc/$SCHED_PID/limits"

hostile A idle 1100 --hold 60
check "the attackers exhaust the descriptors (accept_paused)" \
  wait_event 10 accept_paused reason='"out-of-fds"'
nfd=$(find "/proc/$SCHED_PID/fd" -mindepth 1 2>/dev/null | wc -l)
diag "scheduler descriptors in use: $nfd"
check "at the limit: nvsharectl is answered" sh -c "'$CTL' --json >'$T/st.json'"
check "... and its status counts the attackers" \
  "$HPY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["connections"]; sys.exit(0 if c["open"] >= 900 else 1)' "$T/st.json"
check "at the limit: plain nvsharectl works too" sh -c "'$CTL' >/dev/null"

fc H --gpu-uuid GPU-f --script 'lock;hold 10ms;release'
check "an honest client connecting at the limit registers (within the deadline + 10 s)" \
  wait_ev 13 H WELCOME
check "... locks, releases and exits 0" wait_exit 10 "$PID_H"
check "... exit 0" [ "$RC" = 0 ]
check "the silent attackers were closed at the handshake deadline" \
  has_event conn_closed kind='"new"' uid=65534 reason='"handshake-timeout"'
check "scheduler alive" sched_alive
