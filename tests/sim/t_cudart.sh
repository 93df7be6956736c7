#!/usr/bin/env bash
# The real libcudart.so.13 on the simulated driver: how it finds the driver
# (one dlsym of cuGetProcAddress_v2, 4 calls through it, ~440 lookups through
# the pointer it got for cuGetProcAddress@12000), which private tables it
# asks for, and how far it gets. See README.md "What libcudart needs": it
# stops at the driver integrity check the simulator does not imitate, so the
# runtime API checks are reported as SKIP while that is so.
. "$(dirname "$0")/../lib.sh"

BOOT=$B/tests/sim/cudart_boot
if [ ! -x "$BOOT" ]; then
  ok "# SKIP libcudart.so.13 not installed (no $BOOT)"
  exit 0
fi
export NVSHARE_SIM_LOG=$T/sim.log
out=$("$BOOT" 2>&1)
rc=$?
diag "cudart_boot exit $rc"
echo "$out" | sed 's/^/# boot: /'

g=$T/getproc
grep ' getproc ' "$NVSHARE_SIM_LOG" | cut -d' ' -f3- >"$g"
n=$(wc -l <"$g")
diag "$n cuGetProcAddress calls"
check "first call is the empty probe at version 0" \
  test "$(sed -n 1p "$g")" = 'v2 "" 0 0 -> rc=0 status=not_found(nullptr) -'
check "then cuInit@2000" grep -q '^v2 cuInit 2000 0 -> rc=0 status=found(nullptr) cuInit$' <(sed -n 2p "$g")
check "then cuGetProcAddress@11030 gives the 4-argument symbol" \
  grep -q '^v2 cuGetProcAddress 11030 0 -> rc=0 .* cuGetProcAddress$' <(sed -n 3p "$g")
check "then cuGetProcAddress@12000 gives cuGetProcAddress_v2" \
  grep -q '^v2 cuGetProcAddress 12000 0 -> rc=0 .* cuGetProcAddress_v2$' <(sed -n 4p "$g")
check "more than 400 lookups" test "$n" -gt 400
check "per-thread lookups (flags 2) present" grep -q ' 2 -> rc=0 status=found(nullptr) .*_pt[sd][sz]$' "$g"
check "every lookup passes symbolStatus NULL" test "$(grep -vc '(nullptr)' "$g")" = 0
check "no lookup fails" test "$(grep -vc ' -> rc=0 ' "$g")" = 0
check "cuLaunchKernel per-thread resolves to cuLaunchKernel_ptsz" \
  grep -q '^v2 cuLaunchKernel 7000 2 .* cuLaunchKernel_ptsz$' "$g"
check "cuMemAlloc@3020 resolves to cuMemAlloc_v2" grep -q '^v2 cuMemAlloc 3020 0 .* cuMemAlloc_v2$' "$g"

# The lookup list the client library must handle (tests/sim/cudart13-lookups.txt).
sed -E 's/^v2 ([^ ]+) ([0-9]+) ([0-9]+) -> .* ([^ ]+)$/\1 \2 \3 \4/' "$g" | tail -n +5 | sort -u >"$T/lookups"
if cmp -s "$T/lookups" <(grep -v "^#" "$NVS_ROOT/tests/sim/cudart13-lookups.txt"); then
  ok "lookups match tests/sim/cudart13-lookups.txt"
else
  ok "# SKIP lookups differ from tests/sim/cudart13-lookups.txt (another libcudart build?)"
  diff <(grep -v "^#" "$NVS_ROOT/tests/sim/cudart13-lookups.txt") "$T/lookups" | head -20 | sed 's/^/# /'
fi

check "runtime asked for its interface table" grep -q 'cuGetExportTable 6bd5fb6c5bf4e74a8987d93912fd9df9 (cudart_interface) -> 0' "$NVSHARE_SIM_LOG"
check "runtime retained the primary context through it" grep -q 'export rt.primary_ctx -> 0' "$NVSHARE_SIM_LOG"

if echo "$out" | grep -q '^ok 1 - cudaGetDeviceCount'; then
  # If the runtime ever bootstraps, every runtime check must pass.
  check "runtime API checks" test "$rc" = 0
  echo "$out" | grep -E '^not ok' | sed 's/^not ok [0-9]* - /# failed: /'
elif grep -q 'cuGetExportTable d4082055bde6704b8d34ba123c66e1f2 -> 500' "$NVSHARE_SIM_LOG" &&
     echo "$out" | grep -q 'cudaGetDeviceCount (500 '; then
  ok "runtime stops at the driver integrity check, as documented"
  for what in cudaGetDeviceCount cudaSetDevice cudaMalloc cudaMemcpy cudaMemGetInfo cudaFree; do
    ok "# SKIP $what: libcudart requires the driver's integrity answer (README.md)"
  done
else
  not_ok "runtime failed in an unexpected way"
fi
