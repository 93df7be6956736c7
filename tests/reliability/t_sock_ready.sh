#!/usr/bin/env bash
# The scheduler's socket paths appear only once it accepts connections:
# a client started beside the scheduler either finds no socket (and
# retries or runs unscheduled, as documented) or connects, never gets
# ECONNREFUSED from a path that exists. The same holds for the admin
# socket (nvsharectl), bound the same way (scheduler/server.c).
# slow_listen.so delays every listen() by 1 s so the window between bind()
# and listen() is wide enough to hit.
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
SLOG=$T/scheduler.log
SHIM=$B/tests/reliability/slow_listen.so
SOCK=$NVSHARE_SOCK_DIR/scheduler.sock
ADMIN=$NVSHARE_ADMIN_SOCK_DIR/admin.sock

shim_preload "$SHIM"
bg env LD_PRELOAD="$SHIM_PRELOAD" ASAN_OPTIONS="$SHIM_ASAN_OPTIONS" NVS_SLOW_LISTEN_MS=1000 \
  "$B/nvshare-scheduler" --no-nvml --mode on >>"$SLOG" 2>&1
SCHED_PID=${_pids[-1]}
# Connect as soon as each path shows up (wait_for polls every 20 ms, well
# inside the 1 s the old order left the path unlistened). The admin socket
# is bound first.
check "admin socket path appeared" wait_for 5 test -S "$ADMIN"
out=$("$CTL" --json 2>&1); rc=$?
check "the first connection after the admin path appeared succeeded" test "$rc" = 0
[ "$rc" = 0 ] || diag "nvsharectl: $out"
check "status answered" sh -c "echo '$out' | grep -q '\"socket\"'"
check "client socket path appeared" wait_for 5 test -S "$SOCK"
out=$("$CTL" --tenant --json 2>&1); rc=$?
check "the first connection after the client path appeared succeeded" test "$rc" = 0
[ "$rc" = 0 ] || diag "nvsharectl --tenant: $out"
check "tenant status answered" sh -c "echo '$out' | grep -q '\"view\":\"tenant\"'"
check "no temporary socket left in the directory" \
  sh -c "[ \$(ls -A '$NVSHARE_SOCK_DIR' | grep -vc -e '^scheduler.sock\$' -e '^scheduler.lock\$' -e '^bindings\$' -e '^pods\$') = 0 ]"
check "no temporary socket left in the admin directory" \
  sh -c "[ \$(ls -A '$NVSHARE_ADMIN_SOCK_DIR' | grep -vc -e '^admin.sock\$' -e '^scheduler.lock\$') = 0 ]"
check "the socket is 0666" test "$(stat -c %a "$SOCK")" = 666
kill "$SCHED_PID"
check "stopping removes the socket" wait_for 5 sh -c "! test -e '$SOCK'"
