#!/usr/bin/env bash
# nvs-test: slow (every evasion scenario; t_unmanaged is the fast tier's)
# Unmanaged-process detection that a tenant cannot talk its way out of
# (issue 31 item 3, docs/security.md "What is cooperative"). A process
# counts as managed only while its connection shows it: it attached the
# GPU, and on a serialized GPU it runs kernels only while it holds the lock.
# With NVSHARE_UNMANAGED=serialize (checks every 500 ms here):
# 1. a GPU process that holds a HELLO-only nvshare connection of its own
#    (tests/security/evade_conn.so, no libnvshare) is reported
#    (not-attached) and its GPU serialized;
# 2. one that also attached the GPU but runs kernels on the serialized GPU
#    without ever asking for the lock is reported (ungated) - NVML's
#    per-process utilization shows it running;
# 3. processes that each live about 1.2 s (less than the 1.5 s a process
#    must be seen before it counts) are counted against their owner (here
#    their uid): after two of them left the GPU unmanaged the owner is known, and
#    the GPU stays serialized while they keep coming, and for the hold time
#    (10 s) after the last.
# An honest client takes and gives back the lock beside each (issue 17's
# bound on its waits).
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/unmanaged_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
export NVSHARE_UNMANAGED=serialize
evidence_setup
serialized() { st_is "s['gpus'][0]['serialized']" True; }
concurrent() { st_is "s['gpus'][0]['serialized']" False; }

# evader NAME MODE: sim_app running kernels (2 ms each, for ever) without
# libnvshare, with evade_conn.so's connection of MODE (hello, attach).
evader() {
  bg env LD_PRELOAD="$SHIM_PRELOAD" ASAN_OPTIONS="$SHIM_ASAN_OPTIONS" NVS_EVADE="$2" \
    NVS_EVADE_UUID="${U:-}" "$APP" --name "$1" --report progress --kernels 100000000 \
    --kernel-us 2000 >"$T/$1.out" 2>&1
  eval "PID_$1=${_pids[-1]}"
  wait_log "$HG" "$T/$1.out" "^PROGRESS name=$1 kernel=1/"
}
# honest NAME: a fake client that takes and gives back the lock 300 times;
# checks that it finished and its waits.
honest() {
  fc "$1" --name honest --gpu-uuid "$U" --script "$(honest_script 300)"
  rtt_start "$1"
  wait_exit 60 "$(eval echo "\$PID_$1")"
  check "$2: the honest client finished its 300 lock cycles (rc $RC)" test "$RC" = 0
  check_p99 "$1" "$2"
}
stop() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
next_scheduler() {
  check_rss "$1"
  kill -TERM "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
  mv "$T/scheduler.log" "$T/scheduler-$1.log"; mv "$NVSHARE_EVENTS" "$T/events-$1.jsonl"
}

# ---- 1. a HELLO-only connection ----
start_scheduler --reserve 0 || { not_ok "scheduler starts"; exit 1; }
U=$(st "s['gpus'][0]['uuid']")
evader E hello
check "hello: the evader is a connected client (HELLO, nothing attached)" \
  wait_for "$HG" st_is "[(c['pid'], len(c['gpus'])) for c in s['clients']]" "[($PID_E, 0)]"
check "hello: reported unmanaged all the same (unmanaged_found, reason not-attached)" \
  wait_event "$HG" unmanaged_found gpu=0 pid="$PID_E" reason='"not-attached"'
check "hello: the GPU is serialized for it" wait_for "$HG" serialized
honest H1 "hello"
stop "$PID_E"
check "hello: concurrent again once it is gone" wait_for "$(scaled 25)" concurrent
next_scheduler hello

# ---- 2. attached, never asks for the lock ----
start_scheduler --mode on --reserve 0 || { not_ok "scheduler (mode on) starts"; exit 1; }
evader E2 attach
check "ungated: the evader attached the GPU (a client with GPU 0)" \
  wait_for "$HG" st_is "[(c['pid'], [g['gpu'] for g in c['gpus']]) for c in s['clients']]" "[($PID_E2, [0])]"
check "ungated: it runs kernels without the lock, so it is reported (reason ungated)" \
  wait_event "$HG" unmanaged_found gpu=0 pid="$PID_E2" reason='"ungated"'
check "ungated: the status lists it with that reason" \
  st_is "[(p['pid'], p['reason']) for p in s['unmanaged']['processes']]" "[($PID_E2, 'ungated')]"
honest H2 "ungated"
stop "$PID_E2"
next_scheduler ungated

# ---- 3. short-lived processes ----
start_scheduler --reserve 0 || { not_ok "scheduler (short) starts"; exit 1; }
# About 1.2 s each (12 kernels of 100 ms), one after the other.
# Each one that ended adds a line to $T/runs.
bg bash -c "while [ ! -e '$T/stop' ]; do '$APP' --name S --kernels 12 --kernel-us 100000 >/dev/null 2>&1; echo run >>'$T/runs'; done"
LOOP=${_pids[-1]}
check "short-lived: their owner (uid $(id -u)) is known after two left the GPU unmanaged (unmanaged_owner)" \
  wait_event "$(scaled 30)" unmanaged_owner gpu=0 uid="$(id -u)"
check "short-lived: the GPU is serialized" wait_for "$HG" serialized
# While they keep coming it stays so: three more come and go (counted by
# their ends, not by the clock), and the scheduler never went back to
# concurrent meanwhile (its events) and is serialized after them.
n0=$(grep -c . "$T/runs" 2>/dev/null)
check "short-lived: three more came and went ($n0 before)" \
  wait_for "$(scaled 30)" lines_at_least "$T/runs" . $((n0 + 3))
check "short-lived: never back to concurrent meanwhile (no unmanaged_serialize serialized=0)" \
  sh -c "! grep -qE '$(evpat unmanaged_serialize gpu=0 serialized=0)' '$NVSHARE_EVENTS'"
check "short-lived: still serialized after them" serialized
honest H3 "short-lived"
touch "$T/stop"
wait "$LOOP" 2>/dev/null
check "short-lived: concurrent again after the owner's hold (10 s) once they stop" \
  wait_for "$(scaled 30)" concurrent
check "short-lived: the owner's end reported (unmanaged_owner_gone)" has_event unmanaged_owner_gone gpu=0
check_rss short-lived
check "scheduler healthy" sched_alive
