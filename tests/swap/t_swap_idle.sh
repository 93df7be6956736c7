#!/usr/bin/env bash
# An idle release frees the room the next holder needs (SWAP_HINT). Mode on,
# NVSHARE_GPU_CAPACITY 512Mi, a quantum too long to end (no DROP_LOCK ever),
# two jobs of 336Mi in 3 ranges:
#   A runs, pauses (memory held) and gives the lock to B when B asks;
#   B allocates while holding (the capacity model then has 176 MiB of A
#   left on the GPU), runs, pauses holding the lock;
#   A asks again. The scheduler tells B (SWAP_HINT) what A needs moved out:
#   336 - 176 resident - 0 free = 160 MiB (144 when B's first 16 MiB was
#   reported before its grant: the model counts memory allocated while
#   waiting as not resident). B, idle, moves just that to the host before
#   its idle release, so A's swap-in finds the room free instead of the
#   driver evicting (LRU) during it. Both jobs' data survive.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"

export NVSHARE_SCHED_MODE=on NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=30s
NVSHARE_DEBUG=1 start_scheduler || { not_ok "scheduler starts"; exit 1; }
job A --steps 8 --kernel-us 2000 --pause-after 3 --pause-ms 2000
check "A ran 3 steps and paused, holding its memory" wait_log 20 "$T/A.out" "^PAUSE name=A"
NVSHARE_DEBUG=1 job B --steps 8 --kernel-us 2000 --pause-after 3 --pause-ms 2000
job_wait A 60; job_wait B 60
check "A finished, every byte of its 3 ranges intact" job_ok A
check "B finished, every byte of its 3 ranges intact" job_ok B
pid_of() { grep -oE "HELLO client=$1 pid=[0-9]+" "$SLOG" | head -1 | sed 's/.*pid=//'; }
pa=$(pid_of 1) pb=$(pid_of 2)
check "B released the lock idle while A waited" \
  grep -qE "LOCK_RELEASED client=2 pid=$pb .*idle=1 .*waiters=1" "$SLOG"
check "nobody was asked to drop (the quantum never ended)" sh -c "! grep -q 'DROP_LOCK client' '$SLOG'"
# The last SWAP_HINT B got before its first idle release.
hint=$(awk '/SWAP_HINT client=2 / { h = $0; sub(/.*mib=/, "", h); sub(/ .*/, "", h) }
  /LOCK_RELEASED client=2 .*idle=1/ { print h; exit }' "$SLOG")
line=$(grep -m1 'swap-out of' "$T/B.err" | sed 's/.*GPU/GPU/')
diag "B: last SWAP_HINT $hint MiB; $line"
check "SWAP_HINT: 144 or 160 MiB (A's memory beyond what is left of it on the GPU)" \
  test "$hint" = 160 -o "$hint" = 144
check "B's idle release moved that much to the host" \
  grep -qE "swap-out of ${hint}Mi asked, ${hint}Mi in [0-9]+ ranges moved" "$T/B.err"
pflog >"$T/pf.log"
# The prefetch log: the first swap-out (dst -1) is B's, of that size, and
# A's swap-in (its 256 MiB range first) comes after it.
first=$(awk '$3 == -1 { print $1, $2, $5 / 1048576; exit }' "$T/pf.log")
diag "first swap-out (seq pid MiB): $first"
check "the first swap-out of the run is B's idle release" test "$first" = "${first%% *} $pb $hint"
seq_in=$(awk -v p="$pa" -v o="${first%% *}" '$3 >= 0 && $2 == p && $1 > o && $5 == 268435456 { print $1; exit }' "$T/pf.log")
check "A's swap-in (256 MiB range first) came after it" test -n "$seq_in"
