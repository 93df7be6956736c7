#!/usr/bin/env bash
# Compute and memory limits wired end to end, in the fast tier: t_quota.sh's
# cases single50 (a 50 % compute limit: the scheduler bills and throttles
# the client, the simulated GPU ran its kernels only in billed time) and
# memory (the memory limit from the environment, lowered and removed at
# run time with nvsharectl). Every other case is in the slow tier
# (t_quota.sh). Set NVS_QUOTA_CASES to run others here.
NVS_QUOTA_CASES=${NVS_QUOTA_CASES:-$(sed -n 's/^QUOTA_WIRING="\(.*\)"$/\1/p' "$(dirname "$0")/t_quota.sh")}
export NVS_QUOTA_CASES
exec "$(dirname "$0")/t_quota.sh"
