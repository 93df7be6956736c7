#!/usr/bin/env bash
# The socket directory removed or replaced while the scheduler runs: it
# notices (checks its socket once a second), logs it loudly and re-creates
# directory, lock file and socket; connected clients are never cut off and
# new or retrying clients (re)connect. A non-socket file put in the
# socket's place is never removed (logged once; re-created after it goes).
# The scheduler started twice: tests/sched/t_lifecycle.sh.
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/e2e/e2e_lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
SOCK=$NVSHARE_SOCK_DIR/scheduler.sock

start_scheduler --no-nvml --mode on || { not_ok "scheduler starts"; exit 1; }
# A long-lived client holding the lock across all of it (until the test
# lets it go: a fixed hold can end before a slow machine's checks).
fc H --gpu-uuid GPU-sd --script "lock;until $T/h-done;release;hold 100ms"
check "holder connected" wait_ev "$(scaled 10)" H LOCK_OK

rm -rf "$NVSHARE_SOCK_DIR"
check "removal noticed (socket_lost removed)" wait_event 10 socket_lost path="\"$SOCK\"" reason='"removed"'
check "socket re-created" wait_event 10 socket_recreated path="\"$SOCK\""
check "directory is back (0755) with a 0666 socket" \
  sh -c "test \"\$(stat -c %a '$NVSHARE_SOCK_DIR')\" = 755 -a \"\$(stat -c %a '$SOCK')\" = 666"
check "new connections work (nvsharectl)" sched_alive
check "the connected holder was not cut off" sh -c "$CTL --json | grep -qE '\"holder\":\\{\"client\":1,'"
check "lock file re-taken" test -f "$NVSHARE_SOCK_DIR/scheduler.lock"
"$B/nvshare-scheduler" --no-nvml >"$T/second.log" 2>&1; rc=$?
check "a second scheduler is still refused after the re-creation" \
  test "$rc" = 1 -a "$(count_events socket_blocked reason='"locked"')" -ge 1

# Replaced: a new empty directory in its place.
rm -rf "$NVSHARE_SOCK_DIR"; mkdir -m 0700 "$NVSHARE_SOCK_DIR"
check "replaced directory: socket re-created" \
  wait_events 10 2 socket_recreated
check "replacement directory's own mode left alone" test "$(stat -c %a "$NVSHARE_SOCK_DIR")" = 700

# Socket replaced by a regular file: never removed, logged once. F,
# connected before (on a GPU of its own), asks for the lock 4 s after it
# started: the scheduler checks its socket at the top of every loop and
# wakes at least once a second for it, so when it grants F the lock, it has
# checked at least once more after the check that logged the file (<= 1 s
# after F started). That grant is the marker, not a sleep.
fc F --gpu-uuid GPU-sd-F --script 'hold 4s;lock;release;hold 100ms'
rm -f "$SOCK"; echo keep >"$SOCK"
check "replaced by a file: socket_blocked not-a-socket" wait_event 10 socket_blocked reason='"not-a-socket"'
check "the scheduler runs on (F, connected before, gets the lock 4 s later)" wait_ev 15 F LOCK_OK
check "the file is left alone" grep -q keep "$SOCK"
# A real application started meanwhile runs ungated and retries.
export NVSHARE_SCHED_MODE=on
app C --alloc 8Mi --kernels 2000 --kernel-us 2000
check "application without a reachable scheduler runs ungated" wait_log 5 "$T/C.err" "not reachable"
rm -f "$SOCK"
check "file gone: socket re-created" \
  wait_events 10 3 socket_recreated
t_blk=$(event_field mono_ns socket_blocked reason='"not-a-socket"' | head -1)
t_back=$(event_field mono_ns socket_recreated | sed -n 3p)
diag "the file stood in the socket's place for $(( (${t_back:-0} - ${t_blk:-0}) / 1000000 )) ms"
check "the blocked socket was reported once, over 2+ s of checks" \
  [ "$(count_events socket_blocked reason='"not-a-socket"')" = 1 -a $(( ${t_back:-0} - ${t_blk:-0} )) -ge 2000000000 ]
check "the application connects (retry) and registers" wait_event 5 attach pid="$PID_C"
check "... and is scheduled (waits for or gets the lock)" wait_event 5 req_lock pid="$PID_C"
touch "$T/h-done" # C is scheduled: H may let go, and C runs
app_wait C 30
check "application finished correctly" app_ok C
check "holder finished its script, never disconnected" wait_exit 10 "$PID_H"
check "holder exit 0" [ "$RC" = 0 ]
check "status counts the re-creations" json_has '"socket_recreated":3'
kill -TERM "$SCHED_PID"; wait_exit 5 "$SCHED_PID"
check "SIGTERM removes the re-created socket" test ! -e "$SOCK"
finish
