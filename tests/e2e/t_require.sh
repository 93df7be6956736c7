#!/usr/bin/env bash
# Fail-closed mode (issue 34, item 8). NVSHARE_REQUIRE_SCHEDULER=1: a CUDA
# application that cannot reach the scheduler gets
# CUDA_ERROR_SYSTEM_NOT_READY from its launches, with a warning naming the
# setting and the socket, instead of running ungated; it is neither exited
# nor hung by the library (its own error handling ends it). With the
# scheduler there it runs as usual. And the scheduler warns loudly at start
# when the client socket's directory is one other users cannot search (a
# directory prepared 0700): their applications would run ungated.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"
hg=$(scaled 30)

# No scheduler, fail-closed: the first launch fails, the app reports it.
timeout -k 5 "$hg" env NVSHARE_REQUIRE_SCHEDULER=1 LD_PRELOAD="$PRELOAD" "$APP" --name R \
  --alloc 16Mi --kernels 5 --kernel-us 1000 >"$T/R.out" 2>"$T/R.err"
rc=$?
check "no scheduler + NVSHARE_REQUIRE_SCHEDULER=1: the application's CUDA work fails (exit $rc, not a hang)" \
  bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && ! grep -q 'result=ok' '$T/R.out'"
check "... and the connection warning says so instead of 'running ungated'" \
  grep -q "scheduler not reachable at $NVSHARE_SOCK_DIR/scheduler.sock; CUDA work fails meanwhile (NVSHARE_REQUIRE_SCHEDULER=1)" "$T/R.err"
check "... with CUDA_ERROR_SYSTEM_NOT_READY and a warning naming the setting and the socket" \
  grep -q "NVSHARE_REQUIRE_SCHEDULER=1: cu[A-Za-z_0-9]* refused with CUDA_ERROR_SYSTEM_NOT_READY: the nvshare scheduler is not reachable at $NVSHARE_SOCK_DIR/scheduler.sock" "$T/R.err"
# The same without the setting: ungated, as before (the default).
timeout -k 5 "$hg" env LD_PRELOAD="$PRELOAD" "$APP" --name U --alloc 16Mi --kernels 5 \
  --kernel-us 1000 >"$T/U.out" 2>"$T/U.err"
check "without it: runs ungated and finishes (exit $?)" app_ok U
check "NVSHARE_REQUIRE_SCHEDULER=maybe is named in a warning" bash -c \
  "env NVSHARE_REQUIRE_SCHEDULER=maybe LD_PRELOAD='$PRELOAD' '$APP' --name M --kernels 1 --kernel-us 10 2>&1 >/dev/null |
   grep -q 'ignoring NVSHARE_REQUIRE_SCHEDULER=\"maybe\": expected 1 or 0'"

# With the scheduler: fail-closed changes nothing.
chmod 0755 "$T" # other users may search the test's directory (below)
start_scheduler || { not_ok "scheduler starts"; finish; }
app F --alloc 16Mi --kernels 20 --kernel-us 1000
app_wait F "$hg"
NVSHARE_REQUIRE_SCHEDULER=1 app G --alloc 16Mi --kernels 20 --kernel-us 1000
app_wait G "$hg"
check "... the fail-closed application registered (HELLO) and finished" \
  bash -c "grep -qE '^DONE name=G .*result=ok' '$T/G.out' && ! grep -q refused '$T/G.err'"
check "a reachable client socket directory: no sock_dir_unreachable event" \
  bash -c "! grep -q sock_dir_unreachable '$NVSHARE_EVENTS'"

# A client socket directory prepared 0700: the scheduler says so at start.
mkdir -m 0700 "$T/s2"
NVSHARE_SOCK_DIR=$T/s2 NVSHARE_ADMIN_SOCK_DIR=$T/a2 bg "$B/nvshare-scheduler" --no-nvml >"$T/s2.log" 2>&1
check "prepared 0700: the scheduler starts all the same" wait_for "$hg" test -S "$T/s2/scheduler.sock"
check "... and warns that other users' applications run UNGATED" \
  grep -q "WARN client socket directory $T/s2: $T/s2 is mode 0700, not searchable by other users: applications of any uid but 0 cannot reach the scheduler and run UNGATED" "$T/s2.log"
check "... (event sock_dir_unreachable with path and mode)" \
  has_event sock_dir_unreachable path="\"$T/s2\"" mode='"0700"'
check "... once" test "$(grep -c "WARN client socket directory $T/s2:" "$T/s2.log")" = 1
# What such a user sees (when this machine has the nobody user).
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  mkdir -m 0777 "$T/simn"
  timeout -k 5 "$hg" setpriv --reuid=nobody --regid=nogroup --clear-groups env NVSHARE_SOCK_DIR="$T/s2" \
    NVSHARE_SIM_STATE_DIR="$T/simn" LD_PRELOAD="$PRELOAD" NVSHARE_REQUIRE_SCHEDULER=1 \
    "$APP" --name N --kernels 3 --kernel-us 100 >"$T/N.out" 2>"$T/N.err"
  check "another user's fail-closed application is refused there" \
    grep -q "NVSHARE_REQUIRE_SCHEDULER=1: .* not reachable at $T/s2/scheduler.sock" "$T/N.err"
fi
finish
