# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # sets variables for the scripts that source it; uses tests/lib.sh's
# A real systemd, booted as PID 1 of a systemd-nspawn container, for the
# install tests (after tests/lib.sh). Everything comes from this machine's
# Debian packages (systemd, systemd-container); nothing is downloaded: the
# container's /usr is the host's (read-only, or a writable overlay whose
# changes go to $T), its /etc a minimal one with a machine-id (not a first
# boot: no unit presets) and the host's users, its network private.
#
#   nspawn_require                   root, systemd-nspawn, nsenter, unshare, or
#                                    ends the test (a skip only without root)
#   nspawn_image [--writable-usr]    $I: the image; --writable-usr: /usr and
#                                    /var/lib/dpkg as overlays (dpkg -i works)
#   nspawn_boot [nspawn args...]     boots it; $L = the container's PID 1
#   in_c CMD...                      runs CMD in the container (all namespaces)
#   nspawn_wait_running              waits for is-system-running (running or
#                                    degraded), as a check
#   nspawn_stop                      powers it off (cleanup() kills it anyway)

nspawn_done() { echo "1..$_tap_n"; exit 0; }

nspawn_require() {
  if [ -f "$B/.san" ]; then ok "# SKIP sanitizer build (the container runs the plain, installed programs)"; nspawn_done; fi
  # Only where it truly cannot run: not root (namespaces, mounts).
  if [ "$(id -u)" != 0 ]; then ok "# SKIP needs root to boot a systemd container"; nspawn_done; fi
  local c
  for c in systemd-nspawn nsenter unshare; do
    command -v $c >/dev/null ||
      { not_ok "$c not installed (scripts/install-deps.sh: systemd-container, util-linux)"; nspawn_done; }
  done
  [ -x /usr/lib/systemd/systemd ] || { not_ok "/usr/lib/systemd/systemd missing (Debian package systemd)"; nspawn_done; }
}

I=$T/img
NSPAWN_MOUNTS=()
nspawn_image() {
  mkdir -p "$I"/{usr,etc/systemd/system/multi-user.target.wants,etc/default,var/lib/dpkg,run,tmp,proc,sys,dev,root}
  local l
  for l in bin sbin lib lib64; do [ -L /$l ] && ln -s "usr/$l" "$I/$l"; done
  ln -s ../usr/lib/os-release "$I/etc/os-release"
  ln -s ../run "$I/var/run"
  mkdir -p "$I/var/tmp" && chmod 1777 "$I/var/tmp" "$I/tmp"
  tr -d '-' </proc/sys/kernel/random/uuid >"$I/etc/machine-id" # not a first boot: no presets
  cp /etc/passwd /etc/group /etc/nsswitch.conf "$I/etc/"
  [ -d /etc/dpkg ] && cp -r /etc/dpkg "$I/etc/"
  [ -f /etc/manpath.config ] && cp /etc/manpath.config "$I/etc/"
  if [ "${1:-}" = --writable-usr ]; then
    mkdir -p "$T/ov"/{usr,usr.w,dpkg,dpkg.w}
    NSPAWN_MOUNTS+=("mount -t overlay overlay -o lowerdir=/usr,upperdir=$T/ov/usr,workdir=$T/ov/usr.w $I/usr"
      "mount -t overlay overlay -o lowerdir=/var/lib/dpkg,upperdir=$T/ov/dpkg,workdir=$T/ov/dpkg.w $I/var/lib/dpkg")
  else
    NSPAWN_MOUNTS+=("mount --bind /usr $I/usr" "mount -o remount,bind,ro $I/usr")
  fi
}

# The container's PID 1: systemd, the child of systemd-nspawn.
nspawn_leader() { pgrep -P "$NSPAWN" -x systemd 2>/dev/null; }

nspawn_boot() {
  {
    echo "set -e"
    local m
    for m in "${NSPAWN_MOUNTS[@]}"; do echo "$m"; done
    printf 'exec systemd-nspawn --quiet --register=no --keep-unit --private-network -D %q --boot' "$I"
    for m in "$@"; do printf ' %q' "$m"; done
    echo
  } >"$T/boot.sh"
  # shellcheck disable=SC2217 # bg runs the command with these redirections
  bg unshare -m --propagation private bash "$T/boot.sh" >"$T/boot.log" 2>&1 </dev/null
  NSPAWN=${_pids[-1]}
  wait_for "$(scaled 60)" nspawn_leader
  L=$(nspawn_leader)
  check "systemd boots as PID 1 of the container (host pid ${L:-none})" [ -n "$L" ]
  [ -n "$L" ] || { tail -20 "$T/boot.log" | sed 's/^/# /'; nspawn_done; }
}

in_c() { nsenter -a -t "$L" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

nspawn_wait_running() {
  local state
  # systemctl talks to PID 1 through /run/systemd/private, which exists
  # only once systemd got that far.
  wait_for "$(scaled 60)" in_c test -S /run/systemd/private
  state=$(in_c timeout "$(scaled 120)" systemctl is-system-running --wait 2>&1)
  check "the container's system came up ($state)" bash -c "[[ '$state' == running || '$state' == degraded ]]"
  [ "$state" = degraded ] && in_c systemctl --failed --no-legend | sed 's/^/# failed: /'
}

nspawn_stop() {
  in_c systemctl poweroff >/dev/null 2>&1
  wait_for "$(scaled 30)" bash -c "! kill -0 $NSPAWN 2>/dev/null"
}
