#!/usr/bin/env bash
# Compute and memory limits wired end to end, in the fast tier: t_quota.sh's
# cases single50 (a 50 % compute limit: the scheduler bills and throttles
# the client, the simulated GPU ran its kernels only in billed time) and
# memory (the memory limit from the environment, lowered and removed at
# run time with nvsharectl). Every other case is in the slow tier
# (t_quota.sh). Set NVS_QUOTA_CASES to run others here.
# Wiring, not the quota's accuracy: the limit reaches the client and is
# enforced (billed share within 10 points of 50 %, not 100 %); the 2-point
# bound over quota windows is tests/core/t_quota.c's, exact in virtual
# time, and bench/cpu/run measures it end to end (NVS_TIMING_TARGETS=1).
NVS_QUOTA_CASES=${NVS_QUOTA_CASES:-$(sed -n 's/^QUOTA_WIRING="\(.*\)"$/\1/p' "$(dirname "$0")/t_quota.sh")}
export NVS_QUOTA_CASES
exec "$(dirname "$0")/t_quota.sh"
