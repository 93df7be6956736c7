#!/usr/bin/env bash
# The swap engine never breaks an application's CUDA graph capture (issue
# 32; client/swap_staging.h). On the H200 (2026-11-28, merged build), PyTorch's
# torch.cuda.graph under mode on failed: its graph pool allocated during the
# capture, the staging grew with it, and the staging thread's
# cuMemHostRegister, made in the default (global) capture mode while the
# application captured in global mode, got CUDA_ERROR_STREAM_CAPTURE_
# UNSUPPORTED (900) and invalidated the capture. The simulated GPU rules
# such calls as CUDA does (tests/sim/sim_stream.c sim_capture_unsafe_call);
# the engine's threads make theirs in relaxed mode.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"
export NVSHARE_SIM_LOG=$T/sim.log
# Mode on: serialized from the start, so the staging is pinning.
NVSHARE_SCHED_MODE=on start_scheduler || { not_ok "scheduler starts"; exit 1; }
# shellcheck disable=SC2034 # read by swap_lib.sh's job
RANGES=16Mi
job A --steps 3 --kernel-us 500 --capture-alloc 32Mi
hg=$(scaled 30)
check "A finishes" job_wait A "$hg"
cap=$(grep '^CAPTURE name=A' "$T/A.out")
diag "${cap:-no CAPTURE line}"
check "the capture during which the staging grew succeeds (result=ok)" \
  grep -q '^CAPTURE name=A result=ok' "$T/A.out"
before=$(grep -oE 'pinned_before=[0-9]+' "$T/A.out" | cut -d= -f2)
after=$(grep -oE 'pinned_after=[0-9]+' "$T/A.out" | cut -d= -f2)
check "... and the staging did grow during it (${before:-?} -> ${after:-?} bytes pinned)" \
  test "${after:-0}" -gt "${before:-0}"
check "no pinning refused for a capture" \
  bash -c "! grep -q 'cuMemHostRegister during a stream capture' '$T/sim.log'"
check "no staging warning" bash -c "! grep -q 'swap staging: pinning' '$T/A.err'"
check "A's data intact" job_ok A
