#!/usr/bin/env bash
# The scheduler speaks systemd's notify protocol (scheduler/sd_notify.c,
# docs/operations.md): READY=1 once both sockets listen, WATCHDOG=1 from the
# event loop every half WatchdogSec, STOPPING=1 on SIGTERM; a WATCHDOG_PID
# naming another process is not ours to feed. The whole unit under systemd
# is tests/system/t_systemd.sh (long tier, needs nspawn); this fast check
# exists because a merge once dropped the calls from main.c and only the
# long tier noticed.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

# notify_listener FILE SOCKET: receives datagrams on SOCKET and appends
# each, with "sock=<0|1>" (did the client socket exist when it came), to
# FILE; writes FILE.ready once bound.
notify_listener() {
  python3 - "$1" "$2" "$NVSHARE_SOCK_DIR/scheduler.sock" <<'PY' &
import os, socket, sys
out, path, sched = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
open(out + ".ready", "w").close()
while True:
    m = s.recv(4096).decode()
    with open(out, "a") as f:
        f.write("sock=%d %s\n" % (os.path.exists(sched), m.replace("\n", " ")))
PY
  _pids+=($!)
  wait_for 5 test -e "$1.ready"
}
n_of() { grep -c -- "$2" "$1" 2>/dev/null; }
# mark SOCKET FILE TEXT: sends TEXT to the listener and waits until it is in
# FILE: a datagram socket keeps its order, so everything sent to it before
# is in FILE too (the listener lags behind under load).
mark() {
  python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(sys.argv[2].encode(), sys.argv[1])' "$1" "$3"
  log_has "$2" "$3"
}
# at_least FILE PATTERN N: FILE has N lines matching PATTERN (for wait_for)
at_least() { [ "$(n_of "$1" "$2")" -ge "$3" ]; }

# 1. Under systemd with a 400 ms watchdog (fed every 200 ms).
notify_listener "$T/n1" "$T/notify1"
NOTIFY_SOCKET=$T/notify1 WATCHDOG_USEC=400000 start_scheduler ||
  not_ok "the scheduler starts"
check "READY=1 is sent" wait_for "$(scaled 5)" grep -q 'READY=1' "$T/n1"
check "... once the client socket listens (it existed when READY=1 came)" \
  grep -q '^sock=1 READY=1' "$T/n1"
check "... with MAINPID and a STATUS naming the socket" \
  grep -q "STATUS=listening on $NVSHARE_SOCK_DIR/scheduler.sock MAINPID=$SCHED_PID" "$T/n1"
check "the loop feeds the watchdog (5 WATCHDOG=1 within 5 s x speed)" \
  wait_for "$(scaled 5)" at_least "$T/n1" 'WATCHDOG=1' 5
check "the start says the watchdog's period" \
  grep -q 'systemd watchdog: the event loop reports every 200 ms (WatchdogSec 400 ms)' "$T/scheduler.log"
# A stopped loop does not feed it (systemd would then kill and restart it).
kill -STOP "$SCHED_PID"
mark "$T/notify1" "$T/n1" MARK=stopped # all that was sent before the stop is in
before=$(n_of "$T/n1" 'WATCHDOG=1')
sleep 0.6 # 3 periods: a running loop would have fed it 3 times
mark "$T/notify1" "$T/n1" MARK=later # and all sent since
after=$(n_of "$T/n1" 'WATCHDOG=1')
kill -CONT "$SCHED_PID"
check "a stopped loop does not feed it ($before -> $after)" test "$before" = "$after"
check "... and feeds it again once it runs" \
  wait_for "$(scaled 5)" at_least "$T/n1" 'WATCHDOG=1' $((after + 1))
kill -TERM "$SCHED_PID"
wait "$SCHED_PID"
# Sent before the exit; the listener may write it later (a soak round).
check "SIGTERM: STOPPING=1 is sent" log_has "$T/n1" 'STOPPING=1'

# 2. WATCHDOG_PID names another process: READY=1 still, no watchdog.
notify_listener "$T/n2" "$T/notify2"
NOTIFY_SOCKET=$T/notify2 WATCHDOG_USEC=400000 WATCHDOG_PID=1 start_scheduler ||
  not_ok "the scheduler starts (2)"
check "WATCHDOG_PID of another process: READY=1 all the same" \
  wait_for "$(scaled 5)" grep -q 'READY=1' "$T/n2"
# Its sockets listen and READY=1 is out: the loop has turned; give it 4
# periods of the watchdog it must not feed.
sleep 0.8
check "... and no WATCHDOG=1" test "$(n_of "$T/n2" 'WATCHDOG=1')" = 0
kill -TERM "$SCHED_PID"
wait "$SCHED_PID"

# 3. Not under systemd: nothing said, nothing warned.
mv "$T/scheduler.log" "$T/scheduler-12.log"
start_scheduler || not_ok "the scheduler starts (3)"
check "without NOTIFY_SOCKET: no watchdog, no notify warning" \
  bash -c "! grep -qE 'systemd watchdog|cannot notify systemd|NOTIFY_SOCKET' '$T/scheduler.log'"
kill -TERM "$SCHED_PID"
wait "$SCHED_PID"
