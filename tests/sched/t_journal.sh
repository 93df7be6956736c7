#!/usr/bin/env bash
# Logging for journald (issue 34, item 9): when stderr is the stream that
# systemd named in JOURNAL_STREAM, every line starts with its syslog
# priority (<3> error, <4> warning, <6> info, <7> debug), so that
# `journalctl -p warning` finds the warnings; anywhere else lines are
# unchanged. A GPU node (the NVIDIA driver loaded) whose scheduler cannot
# load NVML is told so at WARNING, not INFO. The log's format is the
# feature here, so this test reads the log.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

# run_sched LOG JOURNAL_STREAM-VALUE ARGS...: starts the scheduler with
# stderr to LOG, waits for its sockets, stops it.
run_sched() {
  local log=$1 js=$2; shift 2
  : >"$log"
  [ "$js" = self ] && js=$(stat -c '%d:%i' "$log")
  JOURNAL_STREAM=$js bg "$B/nvshare-scheduler" "$@" 2>>"$log" >/dev/null
  local pid=${_pids[-1]}
  wait_for "$(scaled 10)" test -S "$NVSHARE_ADMIN_SOCK_DIR/admin.sock"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null
  rm -f "$NVSHARE_ADMIN_SOCK_DIR/admin.sock"
}

# A GPU node as NVML's absence sees it: <proc-root>/driver/nvidia/version.
mkdir -p "$T/proc/driver/nvidia"
echo "NVRM version: NVIDIA UNIX Open Kernel Module 580.00" >"$T/proc/driver/nvidia/version"

# No NVML on the library path (the simulated GPU's would be found).
export LD_LIBRARY_PATH=
run_sched "$T/journal.log" self --proc-root "$T/proc"
check "journal: every line starts with a syslog priority" \
  bash -c "[ -s '$T/journal.log' ] && ! grep -vqE '^<[3467]>\[nvshare\]' '$T/journal.log'"
check "journal: INFO lines are <6>" grep -qE '^<6>\[nvshare\]\[scheduler\] [^ ]+ INFO ' "$T/journal.log"
check "GPU node without NVML: a <4> WARN naming the driver" \
  grep -qE '^<4>\[nvshare\]\[scheduler\] [^ ]+ WARN NVML not available .*NVIDIA driver is loaded' "$T/journal.log"

run_sched "$T/json.log" self --log-format json --proc-root "$T/proc"
check "journal, JSON format: the priority before each object" \
  grep -qE '^<4>\{"ts":"[^"]+","level":"warn","component":"scheduler","msg":"NVML not available' "$T/json.log"

run_sched "$T/plain.log" "" --proc-root "$T/proc"
check "not the journal (no JOURNAL_STREAM): no prefix" \
  bash -c "[ -s '$T/plain.log' ] && ! grep -qE '^<[0-9]>' '$T/plain.log'"
run_sched "$T/other.log" "1:1" --proc-root "$T/proc"
check "JOURNAL_STREAM of another stream (stderr redirected): no prefix" \
  bash -c "[ -s '$T/other.log' ] && ! grep -qE '^<[0-9]>' '$T/other.log'"

mkdir -p "$T/noproc"
run_sched "$T/nogpu.log" self --proc-root "$T/noproc"
check "no NVIDIA driver: NVML's absence is INFO (<6>)" \
  grep -qE '^<6>\[nvshare\]\[scheduler\] [^ ]+ INFO NVML not available' "$T/nogpu.log"
echo "1..$_tap_n"
