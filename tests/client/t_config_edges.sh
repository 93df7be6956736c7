#!/usr/bin/env bash
# The library's configuration edges (issue 34, item 12), as the user sees
# them on the application's stderr: a bad NVSHARE_DEBUG is named, not
# ignored silently; a bad NVSHARE_GPU_MEMORY_LIMIT is warned about once
# (the allocator's configuration and the scheduler connection both read
# it); a value out of range names the range.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
TC=$B/tests/client
if [ ! -x "$TC/probe_alloc" ]; then ok "# SKIP simulated GPU not built"; echo "1..$_tap_n"; exit 0; fi
start_scheduler --no-nvml || not_ok "scheduler started"

# probe NAME ENV=VALUE...: one allocating probe run; its stderr in $T/NAME.err.
probe() {
  local n=$1; shift
  env "$@" LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" convert >/dev/null 2>"$T/$n.err"
  check "$n: the application still runs (exit 0)" [ $? -eq 0 ]
}

probe debug NVSHARE_DEBUG=loud
check "NVSHARE_DEBUG=loud is named in a warning" \
  grep -q 'WARN ignoring NVSHARE_DEBUG="loud": expected 1 or 0' "$T/debug.err"
check "... once" [ "$(grep -c 'NVSHARE_DEBUG=' "$T/debug.err")" = 1 ]

probe limit NVSHARE_GPU_MEMORY_LIMIT=lots
check "a bad NVSHARE_GPU_MEMORY_LIMIT is named" \
  grep -q 'ignoring NVSHARE_GPU_MEMORY_LIMIT="lots": expected a size' "$T/limit.err"
check "... once, though two parts of the library read it" \
  [ "$(grep -c 'NVSHARE_GPU_MEMORY_LIMIT=' "$T/limit.err")" = 1 ]
probe request NVSHARE_GPU_MEMORY_REQUEST=-1
check "a bad NVSHARE_GPU_MEMORY_REQUEST is warned about once" \
  [ "$(grep -c 'ignoring NVSHARE_GPU_MEMORY_REQUEST=' "$T/request.err")" = 1 ]

probe core NVSHARE_GPU_CORE_LIMIT=150
check "an out-of-range NVSHARE_GPU_CORE_LIMIT names the range" \
  grep -q 'ignoring NVSHARE_GPU_CORE_LIMIT="150": expected an integer percentage from 1 to 100' "$T/core.err"
probe wait NVSHARE_ATTACH_WAIT_MS=99999999
check "an out-of-range NVSHARE_ATTACH_WAIT_MS names the range" \
  grep -q 'ignoring NVSHARE_ATTACH_WAIT_MS="99999999": expected an integer from 0 to 60000' "$T/wait.err"

probe good NVSHARE_DEBUG=0 NVSHARE_GPU_MEMORY_LIMIT=4Gi
check "good values: no warning" bash -c "! grep -q WARN '$T/good.err'"
echo "1..$_tap_n"
