#!/usr/bin/env bash
# The scheduler killed (SIGKILL) and restarted under load: four sim_app
# clients (real libnvshare) share a GPU in mode on. While the scheduler is
# gone they run ungated; none crashes or loses work; when it is back they
# re-register with their memory (visible in nvsharectl --json) and are
# scheduled again (LOCK_OK after the restart). One client alone:
# tests/e2e/t_sched_restart.sh.
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/e2e/e2e_lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"

export NVSHARE_SCHED_MODE=on NVSHARE_TQ=100ms
start_scheduler --no-nvml || { not_ok "scheduler starts"; show_logs; exit 1; }
declare -A MI=([A]=8 [B]=16 [C]=24 [D]=32)
for n in A B C D; do app "$n" --alloc "${MI[$n]}Mi" --kernels 700 --kernel-us 2000; done
check "all four registered and scheduled" wait_events 10 4 lock_ok
check "hand-offs between them" wait_events 10 2 lock_released reason='"dropped"'
kill -KILL "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
t_kill=$(date +%s%N)
for n in A B C D; do
  check "$n notices the loss and runs ungated" wait_log 10 "$T/$n.err" "connection lost"
done
before=$(cat "$T"/[ABCD].out | grep -c PROGRESS)
more() { [ "$(cat "$T"/[ABCD].out | grep -c PROGRESS)" -gt "$before" ]; }
wait_for 10 more; after=$(cat "$T"/[ABCD].out | grep -c PROGRESS)
check "they keep running without a scheduler ($before -> $after kernels)" [ "$after" -gt "$before" ]
# The new scheduler's log and events start afresh.
mv "$SLOG" "$T/scheduler-1.log"; mv "$NVSHARE_EVENTS" "$T/events-1.jsonl"
start_scheduler --no-nvml
wait_event 5 listening socket='"client"'
check "new scheduler replaced the stale socket" has_event stale_socket_removed
check "all four re-register (HELLO)" wait_events 10 4 hello
t_back=$(date +%s%N)
diag "restart -> all re-registered: $(( (t_back - t_kill) / 1000000 )) ms (client retry ~1 s)"
json=$("$CTL" --json)
for n in A B C D; do
  b=$(( ${MI[$n]} << 20 ))
  check "$n's memory (${MI[$n]}Mi) is in nvsharectl --json after the restart" \
    grep -qF "\"allocated\":$b" <<<"$json"
done
check "GPU total is the sum (80Mi)" grep -qF "\"allocated\":$((80 << 20))" <<<"$json"
check "scheduling resumed (LOCK_OK from the new scheduler)" wait_event 10 lock_ok
for n in A B C D; do
  app_wait "$n" 60
  check "$n finished all its kernels, memory intact" app_ok "$n"
  pid_var=PID_$n
  check "$n exited 0 (never crashed)" wait "${!pid_var}"
done
# (all four finished above: the whole second run is in the stream)
check "nothing was granted twice at once after the restart" \
  test "$(count_events req_lock holder=-1 queue='[1-9][0-9]*')" = 0
finish
