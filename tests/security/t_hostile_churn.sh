#!/usr/bin/env bash
# nvs-test: slow (hostile load: connection churn and log volume)
# Hostile load, churn and logging (issue 17): uid 65534 connects, sends
# garbage and closes in a loop (before the bounds: 303 k log lines, 45 MB
# in 10 s), and connects, says HELLO and closes in another. Asserted: the log lines it provokes are rate-limited per
# tenant and kind, with "N similar lines suppressed" summaries, to well
# under 1 MB per minute; the accept budget is the churner's own
# (NVSHARE_ACCEPT_RATE per tenant): its connections over it are closed
# unresolved, and new clients of another uid are welcomed within 100 ms
# (times the speed factor) while it churns (before: one bucket for all,
# 4.1 s in the backlog behind the churn, and the app ran ungated); an
# honest client keeps taking the lock with a
# lock wait p99 <= 10 ms (times the speed factor: check_p99); and with
# stderr a pipe that nobody reads, the loop never blocks: the honest
# client is served and the dropped lines are counted. The default bounds
# are in force; refused control messages are logged at most once a second.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
SECS=4

start_scheduler --no-nvml --mode on || { not_ok "scheduler starts"; exit 1; }
# bounds: the limits the status reports, as one tuple.
bounds() {
  "$CTL" --json | "$HPY" -c 'import json,sys; l=json.load(sys.stdin)["limits"]; print((l["max_conns_per_tenant"], l["handshake_timeout_ms"], l["conn_buffer_budget"], l["log_rate"], l["accept_rate"]))'
}
check "the default bounds: 64 connections a tenant, 2 s handshake, 16 MiB budget, 10 lines a second, 200 accepts a second a tenant" \
  test "$(bounds)" = "(64, 2000, $((16 << 20)), 10, 200)"
# conn_stat KEY: a counter of the status's "connections".
conn_stat() { "$CTL" --json | "$HPY" -c 'import json,sys; print(json.load(sys.stdin)["connections"][sys.argv[1]])' "$1"; }
a0=$(conn_stat accepted)
rtt_start H
fc H --gpu-uuid GPU-h --script "$(honest_script 500)"
wait_ev 5 H LOCK_OK
l0=$(wc -c <"$T/scheduler.log")
t0=$(date +%s%N)
hostile C churn 8 --hold "$SECS"
hostile CH churn-hello 4 --hold "$SECS"
# New clients of another uid while the churn goes on: from the start of
# each one's connect() to its WELCOME (fake_client's CONNECTING and
# WELCOME lines), one after the other, ten of them.
welcome_ms() { awk '/ CONNECTING$/ { c = $1 } / WELCOME / && c { printf "%d\n", ($1 - c) / 1000; exit }' "$1"; }
worst=0 nw=0
for i in $(seq 1 10); do
  fc W$i --script 'wait WELCOME 10s'
  wait_exit 30 "$(eval echo "\$PID_W$i")"
  w=$(welcome_ms "$T/W$i.out")
  [ -n "$w" ] && nw=$((nw + 1)) && [ "$w" -gt "$worst" ] && worst=$w
done
check "the churn ran $SECS s" wait_for $((SECS + 20)) grep -q '^DONE' "$T/C.out"
check "the HELLO churn ran $SECS s" wait_for 20 grep -q '^DONE' "$T/CH.out"
diag "garbage: $(grep DONE "$T/C.out"); HELLO: $(grep DONE "$T/CH.out")"
# The accept budget (NVSHARE_ACCEPT_RATE, 200 a second a tenant, a bucket
# 100 deep): however fast the churn connects, the scheduler resolved at
# most that many of the churner's, plus the honest clients' 11 (an upper
# bound, whatever the machine's speed: the time only grows).
accepted=$(( $(conn_stat accepted) - a0 )) el_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "the accept budget held: $accepted connections accepted in $el_ms ms (<= 200/s + 100 + 11)" \
  [ "$accepted" -le $((el_ms / 5 + 100 + 11 + 16)) ]
# Over its budget the churner's connections wait in its own queue (64),
# and beyond that are closed unresolved.
refused() { [ "$(conn_stat accept_rate_parked)" -gt 0 ] && has_event conn_refused reason='"accept-rate"' uid=65534 && [ "$(conn_stat accept_rate_refusals)" -gt 0 ]; }
if [ ${#NOBODY[@]} -gt 0 ]; then
  check "... the churner's connections over its budget were parked, then refused (counted; conn_refused accept-rate events for uid 65534)" refused
  sp=$(end_speed)
  lim=$(latency_limit 100 5000 "$sp")
  diag "new clients under churn: connect->WELCOME worst ${worst} ms of $nw (bound $lim ms: 100 ms x speed $sp under bench/cpu/run, else a hang guard)"
  check "new clients of another uid under churn: all 10 welcomed, connect->WELCOME <= $lim ms (worst $worst ms)" \
    [ "$nw" = 10 -a "$worst" -le "$lim" ]
else
  ok "churn by another tenant # SKIP this test cannot switch users (not root, or no setpriv)"
fi
check "the honest client finished its 500 lock cycles" wait_exit 60 "$PID_H"
check "... exit 0" [ "$RC" = 0 ]
# Summaries of what was held back are written within ~2 s of the last one.
check "suppression summaries in the log" wait_log 5 "$T/scheduler.log" 'similar lines? suppressed'
sup=$("$CTL" --json | "$HPY" -c 'import json,sys; print(json.load(sys.stdin)["limits"]["log_lines_suppressed"])')
check "... and the suppressed lines are counted ($sup)" [ "${sup:-0}" -gt 0 ]
# The attacker's lines: those naming its uid or its tenant.
# The rate over the whole window the lines were written in (the churn's
# SECS, and on a slow machine the time the rest took): never less than
# SECS, so the bound cannot be met by a short window.
bytes=$(tail -c +$((l0 + 1)) "$T/scheduler.log" | grep -E 'uid 65534|uid:65534|uid=65534' | wc -c)
lines=$(tail -c +$((l0 + 1)) "$T/scheduler.log" | grep -cE 'uid 65534|uid:65534|uid=65534')
win_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$win_ms" -lt $((SECS * 1000)) ] && win_ms=$((SECS * 1000))
per_min=$((bytes * 60000 / win_ms))
diag "log lines the churn provoked: $lines lines, $bytes bytes in $win_ms ms (${per_min} bytes/min)"
check "log volume of the churn <= 1 MB/min ($per_min)" [ "$per_min" -le 1000000 ]
check_p99 H "under churn"

# Refused control messages (a tenant on the client socket): each gets its
# reply and its event, their log line comes at most once a second (the
# rest counted in the next one). A SIGHUP's line, queued after them, marks
# the moment they are all written.
l1=$(wc -c <"$T/scheduler.log")
t0=$(date +%s%N)
for _ in $(seq 1 40); do "$CTL" --tenant -S off >/dev/null 2>&1; done
t1=$(date +%s%N)
check "40 refused control messages: 40 events" \
  test "$(count_events ctl_refused socket='"client"')" = 40
check_rss "accept churn, refused control messages"
kill -HUP "$SCHED_PID"
wait_log 5 "$T/scheduler.log" 'SIGHUP: ignored' || not_ok "the SIGHUP line is written"
secs=$(( (t1 - t0 + 999999999) / 1000000000 ))
nref=$(tail -c +$((l1 + 1)) "$T/scheduler.log" | grep -c 'refused CTL_SET')
check "... their log lines at most one a second: $nref lines in ${secs} s" [ "$nref" -ge 1 -a "$nref" -le $((secs + 1)) ]
kill -TERM "$SCHED_PID"; wait_exit 10 "$SCHED_PID"

# stderr a pipe nobody reads: once it is full the writer thread blocks, the
# loop does not. The honest client starts only once lines are being dropped
# (the pipe and the 1 MiB queue behind it are full: a positive marker, not
# a guess at how long filling takes) and runs while the churn goes on. The
# accept rate keeps its default: what is tested is the blocked stderr, not
# a loop that accepts 20,000 connections a second (docs/security.md: that
# takes all of its time, which is what the rate is for).
mkfifo "$T/err.fifo"
# (the redirection inside: bash gives a background job of a script
# /dev/null as its stdin)
bg sh -c 'exec sleep 600 <>"$0"' "$T/err.fifo" # holds the pipe open, reads nothing
# (--log-rate 0: every line the churn provokes is written, unlimited)
bg "$B/nvshare-scheduler" --no-nvml --mode on --log-rate 0 2>"$T/err.fifo"
SCHED_PID=${_pids[-1]}
wait_sched_sockets || not_ok "scheduler starts (stderr unread)"
dropped() {
  "$CTL" --json | "$HPY" -c 'import json,sys; print(json.load(sys.stdin)["limits"]["log_lines_dropped"])'
}
some_dropped() { [ "$(dropped)" -gt 0 ] 2>/dev/null; }
hostile C2 churn 8 --until "$T/C2.stop" --hold 120
check "stderr unread: log lines are being dropped (the pipe and the queue are full)" \
  wait_for 60 some_dropped
d0=$(dropped)
rtt_start H2
fc H2 --gpu-uuid GPU-h --script "$(honest_script 200)"
check "stderr unread: the honest client is served (200 cycles)" wait_exit 60 "$PID_H2"
check "... exit 0" [ "$RC" = 0 ]
check "stderr unread: nvsharectl answers" sh -c "'$CTL' --json >/dev/null"
d=$(dropped)
touch "$T/C2.stop"
check "the second churn ran until told to stop" wait_for 20 grep -q '^DONE' "$T/C2.out"
diag "log lines dropped with stderr unread: $d0 before the honest client, $d after it"
check "... and lines were dropped while the honest client ran ($d0 -> $d)" [ "${d:-0}" -gt "${d0:-0}" ]
check_p99 H2 "with stderr unread"
