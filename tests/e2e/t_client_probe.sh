#!/usr/bin/env bash
# The lock client (client/sched_*.c) against the real scheduler, with a
# fake driver table (client_probe): no interposition, no simulated GPU.
# Turn-taking under a small quantum, idle release latency, several threads
# at the gate, scheduler absent then present, scheduler restart.
# shellcheck disable=SC2154
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"
PROBE=$B/tests/e2e/client_probe
probe() {
  local n=$1; shift
  bg "$PROBE" --name "$n" "$@" >"$T/$n.out" 2>"$T/$n.err"
  eval "PID_$n=${_pids[-1]}"
}
export NVSHARE_SCHED_MODE=on NVSHARE_SCHED_NVML=0

# 1. Turns under a 100 ms quantum, 4 threads per client at the gate.
NVSHARE_TQ=100ms start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
probe A --kernels 200 --kernel-us 2000 --threads 4 --alloc 1073741824
probe B --kernels 200 --kernel-us 2000 --threads 4
# A's 1 GiB goes through accounting (linked, not stubbed) and reaches the
# scheduler in ATTACH_GPU: the scheduler client reads accounting's count.
check "accounting's bytes reach the scheduler (ATTACH allocated=1Gi)" \
  wait_event 10 attach allocated=1073741824
app_wait A 30; app_wait B 30
check "both finish" sh -c "grep -q '^DONE' '$T/A.out' && grep -q '^DONE' '$T/B.out'"
alt=$(alternations)
check "LOCK_OK alternates ($alt)" [ "$alt" -ge 3 ]
# Every quantum's DROP_LOCK is answered, none revoked: the client's next
# release is the drained one (dropped), or, at most once per client, the
# idle release or exit of a job that ended as the DROP_LOCK came (they
# cross; seen under the ASan soak's load).
drops=$(python3 - "$NVSHARE_EVENTS" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
bad, crossed, n = [], {}, 0
for i, e in enumerate(ev):
    if e.get("event") != "drop_lock" or e.get("reason") != "tq-expired":
        continue
    n += 1
    c = e.get("client")
    nxt = next((x for x in ev[i + 1:] if x.get("event") == "lock_released" and x.get("client") == c), None)
    r = nxt.get("reason") if nxt else None
    if r in ("idle", "disconnect"):
        crossed[c] = crossed.get(c, 0) + 1
    elif r != "dropped":
        bad.append("client %s: %s" % (c, r))
bad += ["client %s crossed %d times" % (c, k) for c, k in crossed.items() if k > 1]
bad += ["revoked: client %s" % e.get("client") for e in ev if e.get("event") == "revoke"]
print("%d DROP_LOCK, %d crossed by the end of a job: %s" % (n, sum(crossed.values()), ", ".join(bad) or "ok"))
PY
)
check "every DROP_LOCK answered by a drained LOCK_RELEASED ($drops)" [ "${drops##*: }" = ok ]
nreq=$(count_events req_lock); nok=$(count_events lock_ok)
check "REQ_LOCK once per wait, not per call or thread ($nreq REQ_LOCK, $nok LOCK_OK)" [ "$nreq" -le $((nok + 2)) ]
sw=$(switches A B)
# PROGRESS t= is when a call passed the gate; a thread descheduled between
# the pass and taking the time can still land one line in the next turn, so
# each grant may add a switch: turns give at most 2 per grant, calls running
# together hundreds (200 kernels x 2 clients).
check "gated calls ran in turns ($sw switches, $nok grants)" [ "$sw" -le $((2 * nok + 2)) ]
kill "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
# Each phase reads only its own scheduler's log and events.
mv "$SLOG" "$T/scheduler-1.log"; mv "$NVSHARE_EVENTS" "$T/events-1.jsonl"

# 2. Idle release latency: A idles with B waiting; 30 s quantum.
NVSHARE_TQ=30 start_scheduler || { not_ok "scheduler restarts"; show_logs; exit 1; }
probe D --kernels 300 --kernel-us 2000 --idle-after 150 --idle-ms 1000
wait_log 10 "$T/D.out" "kernel=5/"
probe E --kernels 50 --kernel-us 2000
app_wait D 30; app_wait E 30
check "idle release seen" has_event lock_released client=1 reason='"idle"'
read -r rel d_last e_first lat < <(idle_handoff D E 1 2)
diag "idle release: D's last call done $d_last, release (event) $rel, E's first call done $e_first: $lat ms"
# The target is 50 ms (bench/run idle and tests/gpu/run case 7 measure
# it); here the bound only proves the idle release handed the GPU over
# during D's 1 s pause rather than after it or at the 30 s quantum.
check "E runs during D's idle pause (${lat:-?} ms after D's last call; the pause is 1000 ms)" \
  awk -v l="${lat:--1}" 'BEGIN { exit !(l > 0 && l < 1000) }'
kill "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
mv "$SLOG" "$T/scheduler-2.log"; mv "$NVSHARE_EVENTS" "$T/events-2.jsonl"

# 3. No scheduler at start, then one appears, is killed, and comes back.
# C runs until the end of the section (C-go): 1500 kernels (3 s) alone were
# done before the restarted scheduler came up on a loaded machine.
probe C --kernels 1500 --kernel-us 2000 --until "$T/C-go"
check "runs ungated without a scheduler" wait_log 10 "$T/C.out" "kernel=20/"
check "one warning" grep -q "scheduler not reachable at .*running ungated, will retry" "$T/C.err"
start_scheduler
check "registers when the scheduler appears" wait_event 10 hello client=1
check "gets the lock" wait_event 10 lock_ok client=1
kill -KILL "$SCHED_PID"
check "notices the loss" wait_log 10 "$T/C.err" "connection lost"
# Its lock file is free only once it has exited (on a loaded machine a
# SIGKILLed process can take a while): started before, the new scheduler
# found the old one's lock held and refused to run.
wait "$SCHED_PID" 2>/dev/null
n1=$(grep -c PROGRESS "$T/C.out")
wait_for 10 lines_at_least "$T/C.out" PROGRESS $((n1 + 1)); n2=$(grep -c PROGRESS "$T/C.out")
check "keeps running ($n1 -> $n2)" [ "$n2" -gt "$n1" ]
check "a new scheduler starts" start_scheduler
check "re-registers with the restarted scheduler" wait_events 10 2 hello client=1
check "is gated again" wait_events 10 2 lock_ok client=1
touch "$T/C-go"
app_wait C 30
check "finishes" grep -q "^DONE name=C " "$T/C.out"
check "exit status 0" wait "$PID_C"
n=$(grep -c "not reachable" "$T/C.err")
check "warned once ($n)" [ "$n" -eq 1 ]
finish
