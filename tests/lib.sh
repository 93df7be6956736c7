# shellcheck shell=bash
# shellcheck disable=SC2034 # sets variables for the scripts that source it
# Shared helpers for shell tests. Source it first thing:
#   . "$(dirname "$0")/../lib.sh"
# It gives each test a private temporary directory, a private scheduler
# socket directory, the simulated GPU on the library path, TAP output
# helpers, and a cleanup that kills everything the test started.
set -u
NVS_ROOT=${NVS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
NVS_BUILD=${NVS_BUILD:-build}
case "$NVS_BUILD" in /*) B=$NVS_BUILD;; *) B=$NVS_ROOT/$NVS_BUILD;; esac
export B NVS_ROOT

T=$(mktemp -d "${TMPDIR:-/tmp}/nvs-test.XXXXXX")
export NVSHARE_SOCK_DIR=$T/sock
# The admin socket (docs/security.md): nvsharectl's default, so every
# test's control and full status go through it.
export NVSHARE_ADMIN_SOCK_DIR=$T/admin
# The scheduler's state file (docs/scheduler.md): private to the test, so
# no test restores another's settings (the default is /var/lib/nvshare).
export NVSHARE_STATE_FILE=$T/state.json
# Simulated GPU: fake libcuda.so.1 / libnvidia-ml.so.1 first on the path,
# its shared state (memory, residency, kernels) in a private directory.
export NVSHARE_SIM_STATE_DIR=$T/simgpu
mkdir -p "$NVSHARE_SIM_STATE_DIR" "$T/bin"
# python3 is the system's (Debian's, with the packages
# scripts/install-deps.sh installs), never a version manager's shim in front
# of it: pyenv's is a bash script that cost 0.1 s of CPU per call, which
# tests that poll the status through Python paid many times over.
if [ -x /usr/bin/python3 ]; then
  ln -s /usr/bin/python3 "$T/bin/python3"
  export PATH=$T/bin:$PATH
fi
export LD_LIBRARY_PATH=$B/tests/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
LIBNVSHARE=$B/libnvshare.so
# Under the sanitizer build the ASan runtime must come first in LD_PRELOAD.
if [ -f "$B/.san" ]; then
  ASAN_RT=$(${CC:-gcc} -print-file-name=libasan.so)
  PRELOAD="$ASAN_RT:$LIBNVSHARE"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}
else
  PRELOAD=$LIBNVSHARE
fi
export PRELOAD LIBNVSHARE

# shim_preload SO [EXTRA_ASAN_OPTIONS]: sets SHIM_PRELOAD and
# SHIM_ASAN_OPTIONS to run one of our binaries with the LD_PRELOAD test
# shim SO. Under the sanitizer build the shim goes before the ASan runtime
# (it interposes on what the runtime would otherwise see first), which the
# runtime allows only with verify_asan_link_order=0.
shim_preload() {
  if [ -f "$B/.san" ]; then
    SHIM_PRELOAD="$1:$ASAN_RT"
    SHIM_ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}${2:+:$2}"
  else
    SHIM_PRELOAD=$1 SHIM_ASAN_OPTIONS=${ASAN_OPTIONS:-}
  fi
}

_tap_n=0 _tap_failed=0
ok()     { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $*"; }
not_ok() { _tap_n=$((_tap_n + 1)); _tap_failed=1; echo "not ok $_tap_n - $*"; }
# check "description" command...   -> ok/not ok by exit status
check()  { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
diag()   { echo "# $*"; }

_pids=()
# bg cmd... : start a background process that cleanup() will kill.
bg() { "$@" & _pids+=($!); }

cleanup() {
  local p
  for p in "${_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 0.1
  for p in "${_pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  # NVS_KEEP_TMP keeps every test's directory, NVS_KEEP_FAILED those of
  # tests with a failed check (the soak sets it: a round that fails once
  # in hours leaves its client outputs and event stream to read).
  if [ -n "${NVS_KEEP_TMP:-}" ] || { [ -n "${NVS_KEEP_FAILED:-}" ] && [ "$_tap_failed" = 1 ]; }; then
    echo "# kept $T"
  else
    rm -rf "$T"
  fi
}
trap cleanup EXIT

# The scheduler's event stream (docs/events.md): every scheduler a test
# starts appends its JSON lines here. Tests follow the scheduler through it,
# not through its human log, whose wording is free to change.
export NVSHARE_EVENTS=$T/events.jsonl

# evpat EVENT [FIELD=VALUE]...: an ERE for EVENT lines with those fields
# (VALUE is JSON as written: 3, "disconnect", [0-9]+). Fields are matched in
# the order given, which must be the stream's order (docs/events.md).
evpat() {
  local p="\"event\":\"$1\""
  shift
  local kv
  for kv in "$@"; do p+=".*\"${kv%%=*}\":${kv#*=}[,}]"; done
  printf '%s' "$p"
}
# wait_event SECONDS EVENT [FIELD=VALUE]...: waits for such an event.
wait_event() { local s=$1; shift; wait_for "$s" grep -qE "$(evpat "$@")" "$NVSHARE_EVENTS"; }
# count_events EVENT [FIELD=VALUE]...: how many such events so far.
count_events() { grep -cE "$(evpat "$@")" "$NVSHARE_EVENTS" 2>/dev/null; }
# has_event EVENT [FIELD=VALUE]...: at least one such event.
has_event() { grep -qE "$(evpat "$@")" "$NVSHARE_EVENTS" 2>/dev/null; }
# wait_events SECONDS N EVENT [FIELD=VALUE]...: waits for at least N of them.
wait_events() {
  local s=$1 n=$2
  shift 2
  wait_for "$s" lines_at_least "$NVSHARE_EVENTS" "$(evpat "$@")" "$n"
}
# event_field FIELD EVENT [FIELD=VALUE]...: FIELD's value in each such event.
event_field() {
  local f=$1
  shift
  grep -E "$(evpat "$@")" "$NVSHARE_EVENTS" 2>/dev/null | grep -oE "\"$f\":(\"[^\"]*\"|[^,}]*)" |
    sed -E "s/^\"$f\"://; s/^\"(.*)\"\$/\1/"
}

# start_scheduler [args...]: starts nvshare-scheduler on $NVSHARE_SOCK_DIR
# and $NVSHARE_ADMIN_SOCK_DIR, logging to $T/scheduler.log, and waits for
# both sockets.
# The socket waits are hang guards (they end as soon as the sockets exist),
# stretched by the speed factor: a plain 5 s ran out in a slow ASan soak
# round.
start_scheduler() {
  bg "$B/nvshare-scheduler" "$@" >>"$T/scheduler.log" 2>&1
  SCHED_PID=${_pids[-1]}
  wait_sched_sockets
}

# wait_sched_sockets: waits for both of a starting scheduler's sockets. The
# admin socket alone is not enough: the scheduler creates it first, and a
# client connecting between the two finds no client socket (seen in a soak:
# t_identity's PID-namespace client got ENOENT 21 ms early).
wait_sched_sockets() {
  local hg; hg=$(scaled 10)
  wait_for "$hg" test -S "$NVSHARE_ADMIN_SOCK_DIR/admin.sock" &&
    wait_for "$hg" test -S "$NVSHARE_SOCK_DIR/scheduler.sock"
}

# wait_for SECONDS cmd... : polls cmd until it succeeds: every 10 ms at
# first, then every 20 and 40 ms, from 70 ms on every 50 ms. It tries once
# more after the deadline: a test script that was itself not run for a
# while (a stalled machine) still sees what happened meanwhile. The loop
# starts no process of its own (the clock is $EPOCHREALTIME, the pause a
# read timeout): a poll with `date` and `sleep` started two, and 20 ms
# polls of that kind cost a fifth of a CPU per waiting test.
wait_for() {
  local limit=$1 step=10 end fd s
  shift
  end=$((${EPOCHREALTIME//[!0-9]/} + limit * 1000000))
  # A pipe nobody writes to: read -t on it is a sleep without a process.
  exec {fd}<> <(:)
  while [ "${EPOCHREALTIME//[!0-9]/}" -lt "$end" ]; do
    "$@" >/dev/null 2>&1 && { exec {fd}<&-; return 0; }
    printf -v s '0.%03d' "$step"
    read -r -t "$s" -u "$fd" _
    step=$((step * 2 > 50 ? 50 : step * 2))
  done
  exec {fd}<&-
  "$@" >/dev/null 2>&1
}

# speed_factor: how many times slower than an idle 2-CPU CI machine
# running the plain build this machine runs our code right now (at least
# 1, at most 20): tests/common/speed_probe's time for a fixed piece of work
# over SPEED_REF_US, the same measured there (2026-11-26: 9.5-9.8 ms).
# Measured once per test, the first time it is asked for ($T/.speed). The few tests
# that must judge wall-clock time (docs/testing.md) stretch their bounds by
# it with `scaled`, and print it.
SPEED_REF_US=9600
# speed_now: the factor measured afresh (not kept).
speed_now() {
  local us
  us=$("$B/tests/common/speed_probe" 2>/dev/null) || us=$SPEED_REF_US
  awk -v u="$us" -v r="$SPEED_REF_US" \
    'BEGIN { f = u / r; if (f < 1) f = 1; if (f > 20) f = 20; printf "%.2f\n", f }'
}
speed_factor() {
  [ -s "$T/.speed" ] || speed_now >"$T/.speed"
  cat "$T/.speed"
}
# scaled N [FACTOR]: N (a bound: ms, us, a count) times the speed factor (or
# FACTOR), rounded.
scaled() { awk -v n="$1" -v f="${2:-$(speed_factor)}" 'BEGIN { printf "%d", n * f + 0.5 }'; }

# log_has FILE PATTERN: FILE gets a line matching PATTERN (grep's basic
# syntax), waited for under a hang guard. The scheduler's log is written by
# its log thread (common/log.c's queue): a line about the start can land
# after the sockets are up, when start_scheduler has returned (an ASan soak
# round grepped t_state_file's refusal 1 ms too early).
log_has() { wait_for "$(scaled 10)" grep -q -- "$2" "$1"; }

# latency_limit TARGET GUARD [FACTOR]: what a latency check asserts, in the
# unit of its arguments, times the speed factor (or FACTOR): TARGET when a
# benchmark runs the test (bench/cpu/run sets NVS_TIMING_TARGETS=1),
# else the hang guard GUARD: no test asserts a duration tighter than a hang
# guard (docs/testing.md); the figure is reported either way.
latency_limit() {
  local n=$2
  [ "${NVS_TIMING_TARGETS:-0}" = 1 ] && n=$1
  scaled "$n" "${3:-$(speed_factor)}"
}

# lines_at_least FILE ERE N: FILE has at least N lines matching ERE (a
# condition for wait_for: evaluated anew on every poll).
lines_at_least() { [ "$(grep -cE "$2" "$1" 2>/dev/null)" -ge "$3" ]; }

# wait_log SECONDS FILE PATTERN : waits until FILE has a line matching PATTERN.
wait_log() { wait_for "$1" grep -qE "$3" "$2"; }
