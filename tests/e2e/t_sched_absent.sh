#!/usr/bin/env bash
# No scheduler at start: the application runs ungated with one warning, and
# registers when the scheduler appears mid-run.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

app A --alloc 16Mi --kernels 1500 --kernel-us 2000
check "runs ungated without a scheduler" wait_log 10 "$T/A.out" "^PROGRESS name=A kernel=20/"
check "warns that the scheduler is not reachable" grep -q "scheduler not reachable at $NVSHARE_SOCK_DIR/scheduler.sock; running ungated, will retry" "$T/A.err"
sleep 0.5
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
check "registers when the scheduler appears (HELLO)" wait_event 10 hello client=1 name='"sim_app"'
check "and attaches its GPU with its memory" wait_event 10 attach client=1 allocated=$((16 << 20))
app_wait A 30
check "finishes, memory intact" app_ok A
n=$(grep -c "scheduler not reachable" "$T/A.err")
check "warned once, not per retry ($n)" [ "$n" -eq 1 ]
finish
