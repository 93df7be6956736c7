#!/usr/bin/env bash
# NVML memory information under the preload: the limit is the total, own
# usage the used; no limit: real values. NVML alone never contacts the
# scheduler.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
TC=$B/tests/client
if [ ! -x "$TC/probe_nvml" ]; then ok "# SKIP simulated GPU not built"; echo "1..$_tap_n"; exit 0; fi
G=$((1 << 30)) M=$((1 << 20))
out=$(NVSHARE_GPU_MEMORY_LIMIT=2Gi LD_PRELOAD="$PRELOAD" "$TC/probe_nvml" 0 2>"$T/n0.err")
check "wrapper substituted for dlsym(libnvidia-ml)" grep -q 'lib .*libnvshare' <<<"$out"
check "limit, nothing allocated: v1 total=2Gi used=0 free=2Gi" grep -qx "v1 $((2*G)) 0 $((2*G))" <<<"$out"
check "limit, nothing allocated: v2 likewise" grep -qx "v2 $((2*G)) 0 $((2*G))" <<<"$out"
check "NVML alone: scheduler client not started" bash -c "! grep -q scheduler '$T/n0.err'"
out=$(NVSHARE_GPU_MEMORY_LIMIT=2Gi LD_PRELOAD="$PRELOAD" "$TC/probe_nvml" 100 2>/dev/null)
check "after a 100 MiB cuMemAlloc: used = own usage, free = limit - used (UUID match)" \
  grep -qx "v1 $((2*G)) $((100*M)) $((2*G - 100*M))" <<<"$out"
check "v2 likewise" grep -qx "v2 $((2*G)) $((100*M)) $((2*G - 100*M))" <<<"$out"
out=$(LD_PRELOAD="$PRELOAD" "$TC/probe_nvml" 0 2>/dev/null)
real=$("$TC/probe_nvml" 0 2>/dev/null | grep '^v1')
check "no limit: real values ($real)" grep -qx "$real" <<<"$out"
echo "1..$_tap_n"
