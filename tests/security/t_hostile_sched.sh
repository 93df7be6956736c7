#!/usr/bin/env bash
# A scheduler that does not behave, seen from the application (issue 31
# item 9; docs/client-lock.md "Failure behaviour"). On 3e0f2f1:
#  - a scheduler that made the GPU serialized and never announced PONG was
#    never pinged: the application waited for the lock forever (killed at
#    40 s);
#  - a scheduler that accepts and never answers made the application run
#    ungated after the 200 ms attach wait, silently.
# Now the first is pinged all the same and, silent for NVSHARE_SCHED_TIMEOUT,
# left: the application runs ungated with one warning and finishes; the
# second is said once ("no answer from the scheduler within 200 ms").
# (The application's side of a real scheduler that stops answering:
# tests/reliability/t_silent_sched.sh.)
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/e2e/e2e_lib.sh"
export NVSHARE_SCHED_TIMEOUT=1
against_fake nopong P 'no answer to a ping' "told serialized by a scheduler that never announced PONG"
against_fake mute M 'no answer from the scheduler within 200 ms' "never answered at all"
finish
