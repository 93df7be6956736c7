#!/usr/bin/env bash
# Co-scheduling with the real client library on the simulated GPU (512 MiB,
# capacity 512 MiB, mode auto): a batch job of 256 MiB and two notebooks of
# 160 MiB (NVSHARE_PRIORITY=interactive) that run a few steps, pause (idle,
# memory held) and run again. 576 MiB do not fit: the GPU is serialized, but
# the batch job and one notebook (416 MiB) run together; the notebooks
# release when idle, moving memory to the host as SWAP_HINT asks, so the
# other one finds room. Checked: every running set fits, notebooks ran as
# guests beside the batch job, every job's data survive, nobody revoked.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"

export NVSHARE_SIM_MEM=512Mi
export NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=30s
start_scheduler || { not_ok "scheduler starts"; exit 1; }
go=$T/go
RANGES=128Mi,128Mi NVSHARE_PRIORITY=batch job B --steps 150 --kernel-us 4000 --start-file "$go"
RANGES=32Mi,128Mi NVSHARE_PRIORITY=interactive job N1 --steps 10 --kernel-us 2000 \
  --pause-after 5 --pause-ms 400 --start-file "$go"
RANGES=32Mi,128Mi NVSHARE_PRIORITY=interactive job N2 --steps 10 --kernel-us 2000 \
  --pause-after 5 --pause-ms 400 --start-file "$go"
for n in B N1 N2; do wait_log 30 "$T/$n.out" "^READY name=$n" || not_ok "$n ready"; done
check "576 MiB of 512: serialized" has_event gpu_mode gpu=0 serialized=1
touch "$go"
job_wait B 90; job_wait N1 90; job_wait N2 90
for n in B N1 N2; do check "$n finished, every byte intact" job_ok "$n"; done
# Replays the stream: the expected MiB of the running set at every grant.
mx=$(awk '
  /"event":"hello"/ { match($0, /"client":[0-9]+/); c = substr($0, RSTART + 9, RLENGTH - 9) }
  /"event":"lock_ok"/ { match($0, /"client":[0-9]+/); c = substr($0, RSTART + 9, RLENGTH - 9); run[c] = 1
    n = 0; for (k in run) n++; if (n > m) m = n }
  /"event":"lock_released"/ { match($0, /"client":[0-9]+/); c = substr($0, RSTART + 9, RLENGTH - 9); delete run[c] }
  /"event":"gpu_mode"/ && /"serialized":0/ { for (k in run) delete run[k] }
  END { print m + 0 }' "$NVSHARE_EVENTS")
diag "largest running set: $mx clients"
check "a notebook ran as a guest beside the batch job" has_event lock_ok role='"guest"'
check "never all three at once (576 MiB > 512 MiB)" test "$mx" -le 2
check "notebooks released when idle" has_event lock_released reason='"idle"'
check "no revocation" test "$(count_events revoke)" = 0


