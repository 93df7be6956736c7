#!/usr/bin/env bash
# A PING flood (issue 31 item 10): with NVSHARE_EVENTS set, 3e0f2f1 wrote
# one `ping` event per PING, 227 MiB in 10 s from one connection. Now a
# client's ping events come at most one a second, or one per 1,000 PINGs,
# each with the count answered: 200,000 PINGs, every one answered, write a
# few hundred lines, and their counts add up. An honest client's lock wait
# stays within its bound meanwhile, and the scheduler's memory too.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
N=200000
start_scheduler --no-nvml --mode on || { not_ok "scheduler starts"; exit 1; }
rtt_start H
fc H --gpu-uuid GPU-h --script "$(honest_script 300)"
e0=$(wc -c <"$NVSHARE_EVENTS")
hostile F pingflood "$N" --hold 120
check "the flood ran: $N PINGs sent" wait_for 120 grep -q "^DONE sent=$N " "$T/F.out"
diag "$(grep DONE "$T/F.out")"
check "... every one answered" grep -q "^DONE sent=$N answered=$N " "$T/F.out"
check "the honest client finished its 300 lock cycles" wait_exit 60 "$PID_H"
pid_f=$(event_field pid hello name='"hostile"' | tail -1)
nev=$(count_events ping pid="$pid_f")
sum=$(event_field answered ping pid="$pid_f" | awk '{ n += $1 } END { print n + 0 }')
bytes=$(tail -c +$((e0 + 1)) "$NVSHARE_EVENTS" | grep '"event":"ping"' | wc -c)
diag "ping events: $nev lines for $N PINGs, answered counts adding up to $sum; $bytes bytes of them"
check "$N PINGs: at most $((N / 1000)) + 1 a second ping events ($nev)" [ "$nev" -le $((N / 1000 + 130)) ]
check "... whose answered counts add up to what was answered, less the unreported last ones ($sum)" \
  [ "$sum" -le "$N" -a "$sum" -ge $((N - 1000)) ]
check "the ping events take less than 64 KiB ($bytes bytes; one per PING: ~20 MB)" [ "$bytes" -lt 65536 ]
check_p99 H "beside the PING flood"
check_rss "under the PING flood"
