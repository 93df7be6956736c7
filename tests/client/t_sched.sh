#!/usr/bin/env bash
# Scheduler interplay: a program that never touches CUDA never contacts the
# scheduler; a CUDA program does; the scheduler's run-time memory limit is
# applied, lowered below use and removed.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
TC=$B/tests/client
if [ ! -x "$TC/probe_alloc" ] || [ ! -x "$B/nvshare-scheduler" ]; then
  ok "# SKIP simulated GPU or scheduler not built"; echo "1..$_tap_n"; exit 0
fi
start_scheduler
LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" nocuda >/dev/null 2>"$T/nocuda.err" &
np1=$!; wait "$np1"
LD_PRELOAD="$PRELOAD" sh -c 'true' &
np2=$!; wait "$np2"

mkdir -p "$T/steps"
NVS_STEP_DIR=$T/steps LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" runtime >"$T/rt.out" 2>"$T/rt.err" &
pid=$!; _pids+=("$pid")
if wait_for 10 test -f "$T/steps/ready1"; then
  check "CUDA use: the client said HELLO" wait_event 5 hello
  "$B/nvsharectl" --set-client "$pid" --memory-limit 256Mi >"$T/ctl1.out" 2>&1
  check "nvsharectl set a 256 MiB limit" [ $? -eq 0 ]
  # Not after a sleep: the two processes above had ended before this
  # client started, so anything they sent was queued ahead of its HELLO,
  # and the scheduler has answered nvsharectl since that HELLO.
  no_hello() { ! has_event hello pid="($np1|$np2)"; }
  check "no CUDA use: no HELLO at the scheduler" no_hello
  if wait_for 15 test -f "$T/steps/ready2"; then
    "$B/nvsharectl" --set-client "$pid" --memory-limit none >"$T/ctl2.out" 2>&1
  fi
else
  not_ok "probe did not start"
fi
wait "$pid"; rc=$?
while IFS= read -r l; do
  case "$l" in "ok "*) ok "runtime: ${l#ok - }";; "not ok "*) not_ok "runtime: ${l#not ok - }";; esac
done <"$T/rt.out"
check "runtime probe exited 0" [ $rc -eq 0 ]

# HELLO's memory limit is the one the library enforces itself: the
# environment's NVSHARE_GPU_MEMORY_LIMIT lowered by NVSHARE_GPU_MEMORY_REQUEST
# (both read once, config.c). hello_mem ENV...: the mem_limit of the HELLO
# of a probe run with ENV, as the scheduler logged it.
hello_mem() {
  env "$@" LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" limit >/dev/null 2>&1 &
  local p=$!
  wait "$p"
  wait_for 5 grep -qE "HELLO client=[0-9]+ pid=$p " "$T/scheduler.log" &&
    grep -E "HELLO client=[0-9]+ pid=$p " "$T/scheduler.log" | sed -E 's/.* mem_limit=([^ ]+).*/\1/'
}
check "HELLO: NVSHARE_GPU_MEMORY_LIMIT=1Gi" test "$(hello_mem NVSHARE_GPU_MEMORY_LIMIT=1Gi)" = 1Gi
check "HELLO: ... lowered by NVSHARE_GPU_MEMORY_REQUEST=512Mi" \
  test "$(hello_mem NVSHARE_GPU_MEMORY_LIMIT=1Gi NVSHARE_GPU_MEMORY_REQUEST=$((512 << 20)))" = 512Mi
check "HELLO: a request above the limit does not raise it" \
  test "$(hello_mem NVSHARE_GPU_MEMORY_LIMIT=1Gi NVSHARE_GPU_MEMORY_REQUEST=$((2 << 30)))" = 1Gi
check "HELLO: a bad or 0 limit is none (as the library enforces)" \
  test "$(hello_mem NVSHARE_GPU_MEMORY_LIMIT=bogus)$(hello_mem NVSHARE_GPU_MEMORY_LIMIT=0)" = nonenone
echo "1..$_tap_n"
