#!/usr/bin/env bash
# An idle release frees the room the next holder needs (SWAP_HINT). Mode on,
# a simulated GPU of 512 MiB that evicts for real (LRU) and a capacity of
# 512 MiB, a quantum too long to end (no DROP_LOCK ever), two jobs of 336 MiB
# in 3 ranges:
#   A runs, pauses (memory held) and gives the lock to B when B asks;
#   B allocates and runs (the driver evicts 160 MiB of A to make room; the
#   scheduler's model agrees: 176 MiB of A left), pauses holding the lock;
#   A asks again. The scheduler tells B (SWAP_HINT) what A needs moved out:
#   336 - 176 resident - 0 free = 160 MiB. B, idle, moves just that to the
#   host before its idle release, so A's swap-in finds the room free: the
#   driver evicts none of B's pages. (Without the hint, as before, it evicts
#   160 MiB of B during A's swap-in: LRU picks, not the scheduler.) Both
#   jobs' data survive.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"

export NVSHARE_SIM_MEM=512Mi
export NVSHARE_SCHED_MODE=on NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=30s
# The prefetch path (partial ranges, exactly the hint): the fast path moves
# whole objects (t_swap_fast.sh).
export NVSHARE_SWAP_FAST=0
# Without NVML: this is about hints, not claims. With it, on a loaded
# machine the evidence check (docs/security.md "Claims checked against
# NVML") could sample B twice before its pages were resident and count its
# claim as 0 for a pass, and then no hint was due (seen in CI).
NVSHARE_DEBUG=1 start_scheduler --no-nvml || { not_ok "scheduler starts"; exit 1; }
# A's pause ends when B has run its 3 steps and paused (not after a fixed
# time: on a loaded machine B may start late, and A must not have run on,
# or finished, before B allocated beside it).
job A --steps 8 --kernel-us 2000 --pause-after 3 --pause-file "$T/A.resume"
check "A ran 3 steps and paused, holding its memory" wait_log 20 "$T/A.out" "^PAUSE name=A"
NVSHARE_DEBUG=1 job B --steps 8 --kernel-us 2000 --pause-after 3 --pause-ms 3000
wait_log 60 "$T/B.out" "^PAUSE name=B" || not_ok "B ran 3 steps and paused"
touch "$T/A.resume"
job_wait A 60; job_wait B 60
check "A finished, every byte of its 3 ranges intact" job_ok A
check "B finished, every byte of its 3 ranges intact" job_ok B
pid_of() { event_field pid hello client="$1" | head -1; }
pa=$(pid_of 1) pb=$(pid_of 2)
check "B released the lock idle while A waited" \
  has_event lock_released client=2 pid="$pb" reason='"idle"' waiters=1
# (both finished above: the whole run is in the stream)
check "nobody was asked to drop (the quantum never ended)" test "$(count_events drop_lock)" = 0
# The last SWAP_HINT B got before its first idle release.
hint=$(awk -v h_re="$(evpat swap_hint client=2)" -v r_re="$(evpat lock_released client=2 reason='"idle"')" '
  $0 ~ h_re { h = $0; sub(/.*"mib":/, "", h); sub(/[,}].*/, "", h) }
  $0 ~ r_re { print h; exit }' "$NVSHARE_EVENTS")
line=$(grep -m1 'swap-out of' "$T/B.err" | sed 's/.*GPU/GPU/')
diag "B: last SWAP_HINT $hint MiB; $line"
check "SWAP_HINT to B: 160 MiB (A's 336 MiB beyond its 176 MiB left on the GPU)" test "$hint" = 160
check "B's idle release moved that much to the host" \
  grep -qE "swap-out of 160Mi asked, 160Mi moved .* prefetch path 160Mi in [0-9]+ ranges" "$T/B.err"
pflog >"$T/pf.log"
# The prefetch log: the first swap-out (dst -1) is B's, of that size, and
# A's swap-in (its 256 MiB range first) comes after it.
first=$(awk '$3 == -1 { print $1, $2, $5 / 1048576; exit }' "$T/pf.log")
diag "first swap-out (seq pid MiB): $first"
check "the first swap-out of the run is B's idle release" test "$first" = "${first%% *} $pb 160"
seq_in=$(awk -v p="$pa" -v o="${first%% *}" '$3 >= 0 && $2 == p && $1 > o && $5 == 268435456 { print $1; exit }' "$T/pf.log")
check "A's swap-in (256 MiB range first) came after it" test -n "$seq_in"
eb=$(jfield B evicted_bytes) ea=$(jfield A evicted_bytes)
diag "evicted by the driver: A $ea, B $eb bytes"
check "the driver evicted none of B's pages (the room was freed before A's swap-in)" test "$eb" = 0
check "it did evict A's, when B allocated beside it (160 MiB: nobody to ask then)" \
  test "$ea" = $((160 << 20))
