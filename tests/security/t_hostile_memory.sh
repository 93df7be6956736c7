#!/usr/bin/env bash
# nvs-test: slow (hostile load: 1,000 slowloris connections)
# Hostile load, memory (issue 17): uid 65534 opens 1,000 connections that
# each announce a full 256 KiB frame and send all of it but one byte
# (slowloris: 263 MiB before the bounds), then 60 connections that each
# send 2,000 status requests and never read (slow reader: 129 MiB). The
# per-tenant cap is lifted so that the global buffer budget (default
# 16 MiB) is what holds: the largest consumers are cut (conn_closed
# buffer-budget), the scheduler's peak RSS stays <= 64 MiB, an honest
# client keeps taking the lock meanwhile (lock wait p99 <= 10 ms, check_p99),
# the resident set falls back near its start once the attackers are gone
# (buffers given back), and a scheduler limited to 256 MiB of address space
# (prlimit --as, as the DaemonSet's memory limit would) survives the same
# attack.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"

start_scheduler --no-nvml --mode on --max-conns-per-tenant 0 || { not_ok "scheduler starts"; exit 1; }
h0=$(hwm_kib "$SCHED_PID")
rtt_start H
fc H --gpu-uuid GPU-m --script "$(honest_script 400)"

hostile L slowloris 1000 --hold 60
check "slowloris: frames cut for the buffer budget" \
  wait_event 20 conn_closed reason='"buffer-budget"'
hostile S slowread 60 --requests 2000 --hold 60
check "slow reader: connections cut (budget or not reading)" \
  wait_event 20 conn_closed uid=65534 reason='"(buffer-budget|not-reading|handshake-timeout)"'
# The peak is read once both attackers sent everything they meant to.
# (grep over two files succeeds when either has it: one check each)
sent_both() { grep -q '^SENT' "$T/$1.out" && grep -q '^SENT' "$T/$2.out"; }
check "both attacks delivered" wait_for 30 sent_both L S
check "scheduler alive under both attacks" sched_alive
h1=$(hwm_kib "$SCHED_PID")
diag "scheduler peak RSS: $((h0 / 1024)) MiB at start, $((h1 / 1024)) MiB under slowloris + slow reader"
if san; then
  ok "peak RSS <= 64 MiB # skip sanitizer build (shadow memory, quarantine)"
else
  check "peak RSS $((h1 / 1024)) MiB <= 64 MiB" [ "$h1" -le $((64 * 1024)) ]
fi
b=$("$CTL" --json | "$HPY" -c 'import json,sys; c=json.load(sys.stdin)["connections"]; print(c["buffered_max_bytes"], c["buffer_budget_cuts"])')
diag "buffered high-water mark, cuts: $b"
check "buffered bytes stayed within the budget + one frame" \
  [ "${b%% *}" -le $((16 * 1048576 + 300 * 1024)) ]
check "the honest client finished its 400 lock cycles" wait_exit 60 "$PID_H"
check "... exit 0" [ "$RC" = 0 ]
check_p99 H "under slowloris + slow reader"
kill "$PID_L" "$PID_S" 2>/dev/null
# Once the attackers' connections are gone their buffers are freed and,
# allocated with mmap above 64 KiB, given back to the system: the resident
# set falls back near where it started, far below the peak.
buffered_zero() { [ "$("$CTL" --json | "$HPY" -c 'import json,sys; print(json.load(sys.stdin)["connections"]["buffered_bytes"])')" = 0 ]; }
check "the attackers' connections are gone (nothing buffered)" wait_for 20 buffered_zero
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# The last connections' buffers may still be being freed when the status
# says nothing is buffered (a loaded machine): a hang guard, not a delay.
rss_back() { [ "$(rss_kib "$SCHED_PID")" -le $((h0 + 8 * 1024)) ]; }
san || wait_for 10 rss_back
r1=$(rss_kib "$SCHED_PID")
diag "scheduler RSS after the attack: $((r1 / 1024)) MiB (start $((h0 / 1024)) MiB, peak $((h1 / 1024)) MiB)"
if san; then
  ok "RSS given back # skip sanitizer build (shadow memory, quarantine)"
else
  check "RSS given back: $((r1 / 1024)) MiB <= start + 8 MiB" [ "$r1" -le $((h0 + 8 * 1024)) ]
fi

# The same attack on a scheduler limited to 256 MiB of address space.
if san; then
  ok "prlimit --as survival # skip sanitizer build (ASan reserves terabytes of address space)"
elif ! command -v prlimit >/dev/null; then
  ok "prlimit --as survival # skip no prlimit"
else
  kill -TERM "$SCHED_PID"; wait_exit 10 "$SCHED_PID"
  bg prlimit --as=$((256 << 20)) "$B/nvshare-scheduler" --no-nvml --mode on \
    --max-conns-per-tenant 0 >>"$T/scheduler2.log" 2>&1
  SCHED_PID=${_pids[-1]}
  wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || not_ok "scheduler starts under prlimit"
  hostile L2 slowloris 1000 --hold 60
  hostile S2 slowread 60 --requests 2000 --hold 60
  check "256 MiB address space: both attacks delivered" wait_for 30 sent_both L2 S2
  check "256 MiB address space: alive after slowloris + slow reader" sched_alive
  fc H2 --gpu-uuid GPU-m --script 'lock;hold 10ms;release'
  check "... and an honest client still locks" wait_exit 20 "$PID_H2"
  check "... exit 0" [ "$RC" = 0 ]
fi
