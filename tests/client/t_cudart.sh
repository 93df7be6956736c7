#!/usr/bin/env bash
# The real libcudart.so.13 bootstrapping through our dlsym and
# cuGetProcAddress_v2 substitution on the simulated GPU: the path PyTorch
# takes. Part 1 (always): the runtime's discovery phase under the preload —
# its one dlsym of cuGetProcAddress_v2 gets our wrapper, its ~440 lookups go
# through our wrapper to the driver with their exact arguments, and every
# lookup that returns a name in our table is substituted. Part 2: the runtime
# API calls (cudaMalloc must become managed) — only where the simulated
# driver carries libcudart past its driver integrity check, which it does not
# imitate (tests/sim/README.md); on a GPU tests/gpu/run case 5 checks it.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
TC=$B/tests/client
if [ ! -x "$TC/probe_cudart" ]; then ok "# SKIP libcudart.so.13 or the simulated GPU not built"; echo "1..$_tap_n"; exit 0; fi

export NVSHARE_SIM_LOG=$T/sim.log
NVSHARE_DEBUG=1 LD_PRELOAD="$PRELOAD" "$TC/probe_cudart" >"$T/out" 2>"$T/err"
rc=$?
diag "probe_cudart under the preload exited $rc"
g=$T/getproc
grep ' getproc ' "$NVSHARE_SIM_LOG" | cut -d' ' -f3- >"$g"
n=$(wc -l <"$g")
check "the runtime's discovery reached the driver through us ($n lookups)" test "$n" -gt 400
check "its first lookup is the empty probe, passed through untouched" \
  test "$(sed -n 1p "$g")" = 'v2 "" 0 0 -> rc=0 status=not_found(nullptr) -'
check "cuGetProcAddress@12000 was substituted with our _v2 wrapper" \
  grep -q 'lookup of cuGetProcAddress -> cuGetProcAddress_v2: substituted' "$T/err"
check "cuGetProcAddress@11030 was substituted with our 4-argument wrapper" \
  grep -q 'lookup of cuGetProcAddress -> cuGetProcAddress: substituted' "$T/err"

# Every returned symbol that libnvshare exports must have been substituted.
nm -D --defined-only "$LIBNVSHARE" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$T/ours"
awk '{print $NF}' "$g" | sort -u >"$T/returned"
comm -12 "$T/ours" "$T/returned" >"$T/should"
sed -nE 's/.*-> ([^:]+): substituted$/\1/p' "$T/err" | sort -u >"$T/subst"
missed=$(comm -23 "$T/should" "$T/subst")
check "all $(wc -l <"$T/should") wrapped names the runtime looked up were substituted" test -z "$missed"
[ -n "$missed" ] && diag "not substituted: $(echo $missed)"
for name in cuMemAlloc_v2 cuMemAllocAsync_ptsz cuLaunchKernel_ptsz cuLaunchKernelEx cuGraphLaunch_ptsz cuMemcpyHtoD_v2 \
  cuGraphAddMemAllocNode cuGraphAddMemFreeNode cuGraphAddNode cuGraphAddNode_v2; do
  check "runtime lookup substituted: $name" grep -qx "$name" "$T/subst"
done
check "no unwrapped name was substituted" test -z "$(comm -13 "$T/should" "$T/subst")"

# Part 2: the runtime API, where the simulated driver carries it.
if ! "$TC/probe_cudart" 2>/dev/null | grep -q '^ok 1 '; then
  ok "# SKIP runtime API calls: libcudart stops at the driver integrity check on the simulated GPU (tests/sim/README.md); tests/gpu/run case 5 checks cudaMalloc -> managed on a GPU"
else
  while IFS= read -r l; do
    case "$l" in "ok "*) ok "${l#ok [0-9]* - }";; "not ok "*) not_ok "${l#not ok [0-9]* - }";; esac
  done <"$T/out"
  check "probe_cudart exited 0" [ $rc -eq 0 ]
fi
echo "1..$_tap_n"
