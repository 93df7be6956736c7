#!/usr/bin/env bash
# No scheduler at start: the application runs ungated with one warning,
# registers when the scheduler appears mid-run, and reports the run it made
# without the gate (issue 31 item 2).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

# NVSHARE_DEBUG: each failed retry is logged (DEBUG), the marker below.
NVSHARE_DEBUG=1 app A --alloc 16Mi --kernels 2500 --kernel-us 2000
check "runs ungated without a scheduler" wait_log 10 "$T/A.out" "^PROGRESS name=A kernel=20/"
check "warns that the scheduler is not reachable" grep -q "scheduler not reachable at $NVSHARE_SOCK_DIR/scheduler.sock; running ungated, will retry" "$T/A.err"
# Not a sleep: wait until A has retried (and failed) once more, so that
# "warned once" below tests a retry.
check "retries while the scheduler is absent" \
  wait_log 10 "$T/A.err" "DEBUG scheduler not reachable at $NVSHARE_SOCK_DIR/scheduler.sock \("
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
check "registers when the scheduler appears (HELLO)" wait_event 10 hello client=1 name='"sim_app"'
check "and attaches its GPU with its memory" wait_event 10 attach client=1 allocated=$((16 << 20))
check "and reports its run without the gate (ungated event: unreachable, 1 run)" \
  wait_event 10 ungated client=1 reason='"unreachable"' runs=1
ms=$(event_field ms ungated client=1)
check "... as long as it lasted: from the first attach to the registration (${ms:-?} ms > 0)" \
  awk -v m="${ms:-0}" 'BEGIN { exit !(m > 0) }'
app_wait A 30
check "finishes, memory intact" app_ok A
n=$(grep -c "WARN scheduler not reachable" "$T/A.err")
check "warned once, not per retry ($n)" [ "$n" -eq 1 ]
finish
