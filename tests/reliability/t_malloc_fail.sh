#!/usr/bin/env bash
# Allocation failures in the scheduler: malloc_fail.so (LD_PRELOAD) makes
# 30 % of malloc/calloc/realloc calls fail while armed (SIGUSR2 arms and
# disarms, so start-up is clean). Under that, clients and nvsharectl hammer
# the scheduler: it may drop connections ("out of memory") but never
# crashes, and once allocations work again it serves everyone normally.
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
SLOG=$T/scheduler.log
LG=$B/tests/reliability/load_gen
INJ=$B/tests/reliability/malloc_fail.so

# The injector goes first and forwards to the ASan runtime's allocator.
shim_preload "$INJ" "detect_leaks=0:allocator_may_return_null=1"
bg env LD_PRELOAD="$SHIM_PRELOAD" ASAN_OPTIONS="$SHIM_ASAN_OPTIONS" NVS_MALLOC_FAIL_PERMILLE=300 \
  NVS_MALLOC_FAIL_SEED="${NVS_MALLOC_FAIL_SEED:-7}" \
  "$B/nvshare-scheduler" --no-nvml --mode on --tq 20ms >>"$SLOG" 2>&1
SCHED_PID=${_pids[-1]}
wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || { not_ok "scheduler starts"; exit 1; }
kill -USR2 "$SCHED_PID" # arm
sleep 0.1 # paces: the signal is handled before the load starts; no check follows
for _ in $(seq 4); do
  "$LG" --clients 16 --gpus 2 --cycles 1000 --stall-ms 500 >/dev/null 2>&1 &
  lg=$!
  "$FC" --gpu-uuid GPU-mf --script 'lock;hold 30ms;release;mem 1Gi;lock;release' >/dev/null 2>&1 &
  fcp=$!
  "$CTL" --json >/dev/null 2>&1; "$CTL" >/dev/null 2>&1
  "$CTL" -T 50ms >/dev/null 2>&1
  wait "$lg" "$fcp"
  kill -0 "$SCHED_PID" 2>/dev/null || break
done
check "scheduler survived 4 rounds of load with 30 % allocation failures" kill -0 "$SCHED_PID"
kill -USR2 "$SCHED_PID" # disarm: it reports the count
check "allocations did fail" wait_log 3 "$SLOG" "malloc_fail: [1-9][0-9]* of [0-9]+ calls failed"
diag "$(grep -m1 'malloc_fail:' "$SLOG")"
diag "connections dropped for out of memory: $(count_events conn_closed reason='"out-of-memory"')"
check "failures were handled (connection dropped: conn_closed out-of-memory)" \
  has_event conn_closed reason='"out-of-memory"'
check "no sanitizer report, no crash" sh -c "! grep -qE 'AddressSanitizer|runtime error|SEGV' '$SLOG'"
check "status answers after the failures" sched_alive
out=$("$LG" --clients 32 --gpus 2 --cycles 5000 2>&1); rc=$?
diag "$out"
check "full service afterwards (5000 lock cycles, no violation)" [ "$rc" = 0 ]
kill -TERM "$SCHED_PID"; wait_exit 5 "$SCHED_PID"
check "clean shutdown (exit 0)" [ "$RC" = 0 ]
