#!/usr/bin/env bash
# Socket paths trust nothing about their directories (issue 31 item 8,
# docs/security.md "Two sockets"). On 3e0f2f1:
#  - a client socket directory a user created first was used as it was: a
#    scheduler.lock symlink planted there made root create (open O_CREAT)
#    any file it pointed to;
#  - the socket was chmod()ed by path after bind(), so a path swapped in
#    between (a directory others may write) turned a root-owned 0600 file
#    0666;
#  - "the admin directory is not inside the client directory" compared
#    strings: "//", "x/.." and a symlinked parent passed.
# Now: a directory the scheduler puts a socket or lock file in must be its
# user's (not a symlink); group and other write bits are taken away; the
# lock file is opened without following links and must be a regular file
# of its user; the socket's mode comes from the umask at bind (no chmod by
# path); the admin check compares resolved paths.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
S=$B/nvshare-scheduler
if [ "$(id -u)" != 0 ]; then
  ok "socket directory ownership # SKIP needs root (chown to another uid)"
  exit 0
fi
chmod 755 "$T"
# run LOG ARGS...: a scheduler that is expected not to start (hang guard).
run() {
  local log=$1
  shift
  timeout -k 5 "$(scaled 20)" "$S" --no-nvml --no-kube --state-file none "$@" >"$log" 2>&1
}

# planted DIR TARGET WHAT EXPECTED: a scheduler.lock symlink to TARGET in
# the client directory DIR; the scheduler must refuse to start, say
# EXPECTED, and never create TARGET.
planted() {
  local dir=$1 target=$2 what=$3 expected=$4 rc
  run "$T/planted.log" --sock-dir "$dir" --admin-sock-dir "$dir.admin"
  rc=$?
  check "$what: refused (exit 1), saying so" \
    sh -c "test $rc = 1 && grep -qF \"$expected\" '$T/planted.log'"
  check "... and the planted symlink's target was never created" test ! -e "$target"
}
# 1. A client directory created first by another user, with a planted
# scheduler.lock symlink to a file root would then create.
mkdir -p "$T/evil"
chown 65534 "$T/evil"
setpriv --reuid 65534 --regid 65534 --clear-groups ln -s "$T/pwned" "$T/evil/scheduler.lock"
planted "$T/evil" "$T/pwned" "a client directory owned by another uid" \
  "$T/evil: the client socket directory must be a directory (not a symlink) owned by uid 0"
# 2. Our own directory, with a scheduler.lock symlink in it (planted while
# it was writable): not followed.
mkdir -p "$T/own"
ln -s "$T/pwned2" "$T/own/scheduler.lock"
planted "$T/own" "$T/pwned2" "a scheduler.lock symlink in our own directory" \
  "cannot open $T/own/scheduler.lock (a regular file of uid 0, not a symlink)"

# 3. A client directory others may write (0777): the write bits go, so no
# one can swap paths inside it; the socket gets its mode at bind.
mkdir -p "$T/open"
chmod 0777 "$T/open"
export NVSHARE_SOCK_DIR=$T/open NVSHARE_ADMIN_SOCK_DIR=$T/a3
start_scheduler --no-nvml --no-kube || not_ok "scheduler starts on a 0777 directory"
check "a directory others may write is narrowed: 0777 -> 0755" test "$(stat -c %a "$T/open")" = 755
check "... with a warning naming it" grep -q "$T/open (client socket directory) was writable by others (mode 0777): made it 0755" "$T/scheduler.log"
check "the socket is 0666 from its creation" test "$(stat -c %a "$T/open/scheduler.sock")" = 666
kill -TERM "$SCHED_PID"
wait_exit 10 "$SCHED_PID"

# 4. The admin directory inside the client directory, spelled so that a
# string compare misses it.
mkdir -p "$T/c4" "$T/c4/real"
ln -s "$T/c4/real" "$T/link4"
for a in "$T/c4//admin" "$T/x/../c4/admin" "$T/link4/admin"; do
  mkdir -p "$T/x"
  run "$T/s4.log" --sock-dir "$T/c4" --admin-sock-dir "$a"
  rc=$?
  check "admin directory $a (inside the client directory): refused, naming both" \
    sh -c "test $rc != 0 && grep -q 'is (inside) the client socket directory' '$T/s4.log'"
done
