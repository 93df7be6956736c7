# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # sets RC and PID_<name> for its callers; _pids is tests/lib.sh's
# Helpers for the scheduler's shell tests; source after tests/lib.sh.
FC=$B/tests/sched/fake_client
CTL=$B/nvsharectl

# fc NAME [fake_client args...]: starts a fake client in the background,
# its events in $T/NAME.out, its pid in PID_NAME; waits until it is READY
# (or has exited): a hang guard of 10 s x the speed factor.
fc() {
  local name=$1; shift
  bg "$FC" "$@" >"$T/$name.out" 2>&1
  eval "PID_$name=${_pids[-1]}"
  wait_for "$(scaled 10)" grep -qE ' (READY|EXIT)' "$T/$name.out"
}

# ev_time NAME PATTERN [N]: monotonic us of the Nth (default 1st) event
# line of NAME matching PATTERN (extended regex on the text after the time).
ev_time() {
  awk -v pat="$2" -v n="${3:-1}" '{ t=$1; $1=""; if ($0 ~ pat && ++k == n) { print t; exit } }' "$T/$1.out"
}
# ev_count NAME PATTERN: number of event lines matching.
ev_count() { grep -cE "$2" "$T/$1.out"; }
# wait_ev SECONDS NAME PATTERN
wait_ev() { wait_for "$1" grep -qE "$3" "$T/$2.out"; }
# wait_exit SECONDS PID: waits for a background process to end; sets RC.
# SECONDS is a hang guard, not a latency claim: it is stretched by the
# speed factor and given EXIT_SLACK more, because an exit can be held in
# the kernel on a loaded VM (exit_mmap waiting for a file mapping's lock:
# 5-8 s in most ASan soak rounds, 11 s once for a close() in exit). A
# check that times an exit uses wait_exit_within.
EXIT_SLACK=30
wait_exit() { wait_exit_within $(( $(scaled "$1") + EXIT_SLACK )) "$2"; }
# wait_exit_within SECONDS PID: as wait_exit, the bound taken as it is.
# The poll starts no process (wait_for's way).
wait_exit_within() {
  local end=$((${EPOCHREALTIME//[!0-9]/} + $1 * 1000000)) fd
  exec {fd}<> <(:)
  while kill -0 "$2" 2>/dev/null; do
    [ "${EPOCHREALTIME//[!0-9]/}" -gt "$end" ] && { exec {fd}<&-; RC=124; return 1; }
    read -r -t 0.02 -u "$fd" _
  done
  exec {fd}<&-
  wait "$2"; RC=$?
  return 0
}
# status_json: the scheduler's JSON status (compact, one line).
status_json() { "$CTL" --json; }
# json_has PATTERN: the status JSON contains PATTERN (fixed string).
json_has() { status_json | grep -qF -- "$1"; }
# ms_between A B: (B - A) / 1000, integer ms.
ms_between() { echo $(( ($2 - $1) / 1000 )); }
# sched_alive: the scheduler is still running and answers status.
sched_alive() { kill -0 "$SCHED_PID" 2>/dev/null && "$CTL" --json >/dev/null; }

# grants_ahead PID: for each grant to PID, how many grants on its GPU went
# to others between its REQ_LOCK and that grant (the scheduler's events);
# prints the largest, or "none". Lock turns as an order of events, not a
# duration: a client of another tenant is served after at most the current
# holder's turn, however many connections that tenant has (the bound in
# time, TQ + grace, is tests/core/t_fair.c's, exact in virtual time).
grants_ahead() {
  python3 - "$NVSHARE_EVENTS" "$1" <<'PY'
import json, sys
pid, gpu, worst, n = int(sys.argv[2]), None, None, None
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("event") == "req_lock" and e.get("pid") == pid:
        gpu, n = e.get("gpu"), 0
    elif e.get("event") == "lock_ok" and n is not None and e.get("gpu") == gpu:
        if e.get("pid") == pid:
            worst, n = max(worst or 0, n), None
        else:
            n += 1
print("none" if worst is None else worst)
PY
}
