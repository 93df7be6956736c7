#!/usr/bin/env bash
# nvs-test: slow (hostile load: descriptor exhaustion)
# Hostile load, descriptors (issues 17 and 31). The scheduler runs with
# nofile=1024 (the systemd unit's old default).
#  1. 17 uids each register 63 idle clients (HELLO, no GPU): on 3e0f2f1
#     they held 1,071 descriptors, the limit was reached, and a new
#     client waited for seconds and ran ungated. Now a tenant keeps at most
#     NVSHARE_MAX_IDLE_CLIENTS_PER_TENANT (16) clients without a GPU (its
#     oldest go), so descriptors never run out, and an honest client is
#     welcomed (100 ms x speed under bench/cpu/run) and locks.
#  2. With those bounds lifted the same attack runs the descriptors out,
#     and then the idle connections of the tenant holding the most are
#     closed first (fd-pressure), so an honest client is again welcomed
#     (the same bound); nvsharectl is answered from
#     the descriptor reserve all the while.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"

if ! command -v prlimit >/dev/null || [ ${#NOBODY[@]} = 0 ]; then
  ok "descriptor exhaustion # SKIP needs prlimit, root and setpriv (attackers of other uids)"
  exit 0
fi
conn_stat() { "$CTL" --json | "$HPY" -c 'import json,sys; print(json.load(sys.stdin)["connections"][sys.argv[1]])' "$1"; }
# welcome_ms NAME: from the start of NAME's connect() to its WELCOME.
welcome_ms() { awk '/ CONNECTING$/ { c = $1 } / WELCOME / && c { printf "%d\n", ($1 - c) / 1000; exit }' "$T/$1.out"; }
# 100 ms x speed under bench/cpu/run, a 5 s x speed hang guard in the tiers.
limit_ms() { latency_limit 100 5000 "$(end_speed)"; }

bg prlimit --nofile=1024 "$B/nvshare-scheduler" --no-nvml --mode on >>"$T/scheduler.log" 2>&1
SCHED_PID=${_pids[-1]}
wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || { not_ok "scheduler starts"; exit 1; }
check "scheduler runs with 1024 descriptors" \
  sh -c "grep -qE 'Max open files +1024 ' /proc/$SCHED_PID/limits"

# 1. 17 uids x 63 idle clients.
apids=()
for u in $(seq 60001 60017); do
  bg setpriv --reuid "$u" --regid "$u" --clear-groups "$HPY" "$HOSTILE" \
    "$NVSHARE_SOCK_DIR/scheduler.sock" register 63 --hold 120 >"$T/A$u.out" 2>&1
  apids+=("${_pids[-1]}")
done
all_ready() { [ "$(cat "$T"/A600*.out | grep -cE '^(READY|DONE)')" = 17 ]; }
check "17 uids registered 63 clients each" wait_for 60 all_ready
cuts() { [ "$(conn_stat idle_client_cuts)" -ge $((17 * (63 - 16))) ]; }
check "each tenant keeps 16 idle clients: the other 47 of each were closed (idle-limit)" \
  wait_for 30 cuts
open=$(conn_stat open)
check "open connections stay bounded: $open <= 17 x 16 + 32" [ "$open" -le $((17 * 16 + 32)) ]
check "descriptors never ran out (no accept pause)" test "$(conn_stat accept_pauses)" = 0
fc H1 --gpu-uuid GPU-f --script 'lock;hold 10ms;release'
w=$(welcome_ms H1)
check "an honest client is welcomed ($w ms <= $(limit_ms) ms)" \
  [ -n "$w" ] && [ "$w" -le "$(limit_ms)" ]
check "... locks, releases and exits 0" wait_exit 10 "$PID_H1"
check "... exit 0" [ "$RC" = 0 ]
check "the idle-limit closes are said (conn_closed idle-limit)" \
  has_event conn_closed reason='"idle-limit"'
kill -TERM "$SCHED_PID"
wait_exit 10 "$SCHED_PID"

# 2. The bounds lifted: the same 17 uids now hold 1,071 idle clients,
# more than the descriptors.
# Ours only (setpriv execs the attacker: these are their pids): a pkill
# by name also killed the attackers of security tests running beside this
# one.
kill "${apids[@]}" 2>/dev/null
bg prlimit --nofile=1024 "$B/nvshare-scheduler" --no-nvml --mode on --max-conns-per-tenant 0 \
  --max-idle-clients-per-tenant 0 >>"$T/scheduler.log" 2>&1
SCHED_PID=${_pids[-1]}
wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || { not_ok "scheduler 2 starts"; exit 1; }
for u in $(seq 60001 60017); do
  bg setpriv --reuid "$u" --regid "$u" --clear-groups "$HPY" "$HOSTILE" \
    "$NVSHARE_SOCK_DIR/scheduler.sock" register 63 --hold 120 >"$T/B$u.out" 2>&1
done
full() { [ "$(conn_stat fd_pressure_closes)" -gt 0 ]; }
check "the idle clients exhaust the descriptors, and idle ones are closed to make room (fd-pressure)" \
  wait_for 60 full
diag "scheduler descriptors: $(find "/proc/$SCHED_PID/fd" -mindepth 1 2>/dev/null | wc -l)"
check "at the limit: nvsharectl is answered" sh -c "'$CTL' --json >'$T/st.json'"
diag "connections: $("$HPY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["connections"])' "$T/st.json")"
most_open() { [ "$(conn_stat open)" -ge 900 ]; }
check "... and its status counts the attackers (900 or more open)" wait_for 30 most_open
# Every attacker connected (their connections in the scheduler or its
# backlog), so that the honest client comes after them all.
all_b_ready() { [ "$(cat "$T"/B600*.out | grep -cE '^(READY|DONE)')" = 17 ]; }
wait_for 60 all_b_ready || not_ok "the 17 attackers connected"
fc H2 --gpu-uuid GPU-f --script 'lock;hold 10ms;release'
w=$(welcome_ms H2)
[ -n "$w" ] || diag "H2: $(tr '\n' ' ' <"$T/H2.out" | head -c 600)"
check "an honest client at the limit is welcomed ($w ms <= $(limit_ms) ms)" \
  [ -n "$w" ] && [ "$w" -le "$(limit_ms)" ]
check "... locks, releases and exits 0" wait_exit 10 "$PID_H2"
check "... exit 0" [ "$RC" = 0 ]
check "scheduler alive" sched_alive
check_rss "17 uids x 63 connections"
