#!/usr/bin/env bash
# The real libcudart.so.13 bootstrapping through our dlsym and
# cuGetProcAddress_v2 substitution: cudaMalloc must become managed.
. "$(dirname "$0")/../lib.sh"
TC=$B/tests/client
if [ ! -x "$TC/probe_cudart" ]; then ok "# SKIP simulated GPU not built"; echo "1..$_tap_n"; exit 0; fi
# Baseline without us: does the simulated driver carry libcudart at all?
if ! "$TC/probe_cudart" 2>/dev/null | grep -q '^ok 1 '; then
  ok "# SKIP the simulated GPU does not run libcudart.so.13 yet (baseline without preload fails)"
  echo "1..$_tap_n"; exit 0
fi
out=$(LD_PRELOAD="$PRELOAD" "$TC/probe_cudart" 2>"$T/cudart.err")
rc=$?
while IFS= read -r l; do
  case "$l" in "ok "*) ok "${l#ok [0-9]* - }";; "not ok "*) not_ok "${l#not ok [0-9]* - }";; esac
done <<<"$out"
check "probe_cudart exited 0" [ $rc -eq 0 ]
echo "1..$_tap_n"
