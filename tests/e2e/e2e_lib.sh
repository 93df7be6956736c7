# shellcheck shell=bash disable=SC2154
# Helpers for the end-to-end tests (sourced after tests/lib.sh): run sim_app
# under libnvshare.so on the simulated GPU, and read what it printed.
APP=$B/tests/e2e/sim_app
SLOG=$T/scheduler.log # the human log: shown on failure, never asserted on

# app NAME [sim_app args...]: starts sim_app in the background, stdout in
# $T/NAME.out, stderr (the library's log) in $T/NAME.err; sets PID_NAME.
app() {
  local n=$1; shift
  bg env LD_PRELOAD="$PRELOAD" "$APP" --name "$n" --report progress "$@" \
    >"$T/$n.out" 2>"$T/$n.err"
  eval "PID_$n=${_pids[-1]}"
}

# wait_ready NAME...: waits (a hang guard) until each app, started with
# --start-file "$T/go", has allocated its memory and waits for the go; the
# test then touches $T/go. Tests whose claim needs two runs to overlap
# start them so: one started after the other could, on a loaded machine,
# begin only after the other had finished.
wait_ready() {
  local n hg
  hg=$(scaled 30)
  for n in "$@"; do
    wait_log "$hg" "$T/$n.out" "^READY name=$n " || not_ok "$n allocated its memory (READY)"
  done
}

# app_wait NAME SECONDS: waits for NAME's DONE line.
app_wait() { wait_log "$2" "$T/$1.out" "^DONE name=$1 "; }
# app_ok NAME: NAME printed DONE with result=ok.
app_ok() { grep -qE "^DONE name=$1 .*result=ok" "$T/$1.out"; }

# first_t NAME KIND: t= of NAME's first line of KIND (PROGRESS, DONE...).
first_t() { awk -v k="$2" '$1 == k { for (i = 2; i <= NF; i++) if ($i ~ /^t=/) { print substr($i, 3); exit } }' "$T/$1.out"; }
# idle_handoff A B CLIENT_A KERNEL_MS: the idle release from A to B, judged
# around the scheduler's own event: "REL A_LAST B_FIRST LAT" (ms, CLOCK_
# MONOTONIC like the apps' t=): REL = A's first lock_released with reason
# idle (event mono_ns), A_LAST = A's last PROGRESS before it, B_FIRST = B's
# first PROGRESS, LAT = B_FIRST - A_LAST - KERNEL_MS (B's first kernel).
# A's last kernel is read off its output rather than its planned idle phase:
# a CPU-starved A that idles early hands over early, rightly.
idle_handoff() {
  local rel
  rel=$(grep -E '"event":"lock_released"' "$NVSHARE_EVENTS" | grep -E "\"client\":$3," |
    grep -E '"reason":"idle"' | head -1 | sed -E 's/.*"mono_ns":([0-9]+).*/\1/')
  [ -n "$rel" ] || return 1
  awk -v rel="$rel" -v k="$4" -v fa="$T/$1.out" -v fb="$T/$2.out" 'BEGIN {
    r = rel / 1e6; al = ""; bf = ""
    while ((getline l < fa) > 0) { split(l, f, " ")
      if (f[1] == "PROGRESS") for (i = 2; i in f; i++) if (f[i] ~ /^t=/) { t = substr(f[i], 3) + 0; if (t <= r) al = t } }
    while ((getline l < fb) > 0) { split(l, f, " ")
      if (f[1] == "PROGRESS" && bf == "") for (i = 2; i in f; i++) if (f[i] ~ /^t=/) bf = substr(f[i], 3) + 0 }
    if (al == "" || bf == "") exit 1
    printf "%.3f %.3f %.3f %.2f\n", r, al, bf, bf - al - k }'
}
# field FILE KEY: value of KEY=... on the first line of FILE that has it.
field() { grep -oE "(^| )$2=[^ ]*" "$1" | head -1 | sed "s/^ *$2=//"; }

# The simulated GPU's log: one line per kernel with its place on the
# device's timeline (tests/sim/README.md).
export NVSHARE_SIM_LOG=$T/sim.log
# kernel_switches: how often the device's kernel timeline (by start time)
# changes from one process to another: the hand-offs when serialized, ~ the
# number of kernels when running together. The device's own times, so a
# process that was descheduled before it printed its progress does not
# count as running in the other's turn.
kernel_switches() {
  awk '$2 == "kernel" { sub("start_ns=", "", $4); print $4, $1 }' "$NVSHARE_SIM_LOG" 2>/dev/null |
    owner_changes
}
# owner_changes: reads "TIME OWNER" lines; prints how often the owner
# changes in time order.
owner_changes() { sort -n | awk '{ if (NR > 1 && $2 != last) s++; last = $2 } END { print s + 0 }'; }
# switches A B: the same from A's and B's PROGRESS lines (by their t=),
# for programs without the simulated GPU (client_probe): a process
# descheduled between its call and taking the time can land a line in the
# other's turn, so bounds on it must allow for that.
switches() {
  cat "$T/$1.out" "$T/$2.out" | awk '$1 == "PROGRESS" { n = ""; t = ""
      for (i = 2; i <= NF; i++) { if ($i ~ /^name=/) n = substr($i, 6); if ($i ~ /^t=/) t = substr($i, 3) }
      print t, n }' | owner_changes
}
# kernels_of NAME: how many kernels NAME's process ran on the device.
kernels_of() { awk -v p="$(eval echo "\$PID_$1")" '$1 == p && $2 == "kernel"' "$NVSHARE_SIM_LOG" 2>/dev/null | wc -l; }

# lock_owners: the client ids of the lock_ok events, in order.
lock_owners() { event_field client lock_ok | tr '\n' ' '; }

# alternations: how many grants go to a different client than the previous one.
alternations() { lock_owners | awk '{ for (i = 2; i <= NF; i++) if ($i != $(i-1)) s++ } END { print s + 0 }'; }

show_logs() {
  local f
  for f in "$T"/*.out "$T"/*.err "$SLOG" "$NVSHARE_EVENTS"; do
    [ -f "$f" ] || continue
    echo "# ---- $(basename "$f") (last 15 lines)"
    tail -n 15 "$f" | sed 's/^/#   /'
  done
}

# Failures show the logs (so do all runs with NVS_VERBOSE=1).
not_ok() { _tap_n=$((_tap_n + 1)); echo "not ok $_tap_n - $*"; E2E_FAILED=1; }
finish() {
  if [ -n "${E2E_FAILED:-}" ] || [ -n "${NVS_VERBOSE:-}" ]; then show_logs; fi
  true
}

# against_fake MODE NAME WARNING WHAT: a misbehaving scheduler
# (fake_sched.py MODE) and an application NAME, which must run ungated,
# finish with correct results, warn once (WARNING, a grep pattern) and
# exit 0.
against_fake() {
  local mode=$1 n=$2 warn=$3 what=$4 fake pid
  rm -f "$NVSHARE_SOCK_DIR/scheduler.sock"
  mkdir -p "$NVSHARE_SOCK_DIR"
  bg python3 "$NVS_ROOT/tests/reliability/fake_sched.py" "$NVSHARE_SOCK_DIR/scheduler.sock" "$mode" --ready "$T/fake-$mode"
  fake=${_pids[-1]}
  wait_for 5 test -e "$T/fake-$mode"
  app "$n" --alloc 16Mi --kernels 50 --kernel-us 2000
  pid=${_pids[-1]}
  check "$n, $what, runs ungated and finishes" app_wait "$n" 10
  check "$n's results are correct" app_ok "$n"
  check "$n warned once ($warn)" test "$(grep -c "$warn" "$T/$n.err")" = 1
  wait "$pid"
  check "$n exits 0" test $? = 0
  kill -TERM "$fake" 2>/dev/null
}
