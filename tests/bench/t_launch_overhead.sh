#!/usr/bin/env bash
# What libnvshare adds per cuLaunchKernel, CPU only, against the stub
# driver (bench/micro/run): uncapped, serialized with the lock held, and
# capped (a compute-limited client). Asserts 10x the targets (10 ns, 10 ns,
# 100 ns) so that a busy 2-CPU machine passes and a lock or syscall on the
# fast path fails; the figures are printed (docs/BENCHMARKS.md).
# shellcheck disable=SC1091 # lib by path
. "$(dirname "$0")/../lib.sh"

if [ -f "$B/.san" ]; then
  ok "launch overhead # SKIP sanitizer build (timings mean nothing there)"
  exit 0
fi
out=$("$NVS_ROOT/bench/micro/run" --build "$B" 2>"$T/err")
rc=$?
check "bench/micro/run ran (rc $rc)" test "$rc" = 0
[ "$rc" = 0 ] || { sed 's/^/# /' "$T/err"; exit 1; }
while IFS= read -r l; do diag "$l"; done <<<"$out"
val() { sed -n "s/^$1=//p" <<<"$out"; }
le() { awk -v v="$1" -v m="$2" 'BEGIN { exit !(v != "" && v <= m) }'; }
check "uncapped: $(val uncapped_added_ns) ns added per launch (target 10, bound 100)" \
  le "$(val uncapped_added_ns)" 100
check "serialized, lock held: $(val held_added_ns) ns added (target 10, bound 100)" \
  le "$(val held_added_ns)" 100
check "capped: $(val capped_added_ns) ns added (target 100, bound 1000)" \
  le "$(val capped_added_ns)" 1000
