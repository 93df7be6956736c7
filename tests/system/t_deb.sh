#!/usr/bin/env bash
# nvs-test: long (builds the package, boots systemd in a container and installs it there)
# The Debian package (issue 34, item 11; deploy/deb): `make deb`, then in a
# systemd container (tests/system/nspawn_lib.sh) whose /usr and dpkg
# database are writable overlays of this machine's (so the package's
# dependencies are the ones installed here, and nothing of it reaches the
# host): dpkg -i installs it, enables and starts nvshare-scheduler.service;
# the man pages and documents are there; the demo runs against the
# installed library and scheduler; dpkg -r stops the service and removes
# the files but the conffile; dpkg -P leaves nothing of the package.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
. "$(dirname "$0")/nspawn_lib.sh"
nspawn_require
for c in dpkg-deb dpkg-shlibdeps help2man; do
  command -v $c >/dev/null || { not_ok "$c not installed (scripts/install-deps.sh)"; nspawn_done; }
done

# 1. The package, from the test's build (never rebuilding the programs).
o=()
for a in libnvshare.so nvshare-scheduler nvsharectl nvshare-device-plugin nvshare-dra-plugin; do o+=(-o "$B/$a"); done
D=$T/debbuild
if make -s --no-print-directory B="$B" MAN_BUILD="$T/man" "${o[@]}" DEB_DIR="$D" deb >"$T/deb.log" 2>&1; then
  ok "make deb ($(grep -o 'Depends: .*' "$T/deb.log" | head -1))"
else
  not_ok "make deb"; tail -20 "$T/deb.log" | sed 's/^/# /'; nspawn_done
fi
DEB=$(ls "$D"/nvshare_*.deb 2>/dev/null | head -1)
want=$(tr -d ' \t\r\n' <VERSION)
check "named nvshare_${want}_<arch>.deb" bash -c "[[ '$(basename "${DEB:-none}")' == nvshare_${want}_*.deb ]]"
list=$(dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's#^\./#/#' | sort)
for f in /usr/lib/libnvshare.so /usr/sbin/nvshare-scheduler /usr/bin/nvsharectl \
  /lib/systemd/system/nvshare-scheduler.service /etc/default/nvshare-scheduler \
  /usr/share/man/man8/nvshare-scheduler.8.gz /usr/share/man/man1/nvsharectl.1.gz \
  /usr/share/man/man7/libnvshare.7.gz /usr/share/doc/nvshare/copyright \
  /usr/share/doc/nvshare/docs/architecture.md /usr/share/doc/nvshare/CHANGELOG.md.gz; do
  grep -qx "$f" <<<"$list" || missing+=" $f"
done
check "the package holds the programs, the unit, the settings template, man pages, documents${missing:+ (missing:$missing)}" \
  [ -z "${missing:-}" ]
check "/etc/default/nvshare-scheduler is a conffile" \
  bash -c "dpkg-deb -I '$DEB' conffiles | grep -qx /etc/default/nvshare-scheduler"
check "the unit starts /usr/sbin/nvshare-scheduler" \
  bash -c "dpkg-deb --fsys-tarfile '$DEB' | tar -xOf - ./lib/systemd/system/nvshare-scheduler.service | grep -qx 'ExecStart=/usr/sbin/nvshare-scheduler'"

# 2. Install it in a container with systemd as PID 1.
nspawn_image --writable-usr
mkdir -p "$I/pkg"
cp "$DEB" "$I/pkg/nvshare.deb"
nspawn_boot --bind-ro="$NVS_ROOT"
nspawn_wait_running
# A machine that starts services: this one's (a container image's) policy
# forbids it (policy-rc.d exit 101); the overlay hides it from the test.
in_c rm -f /usr/sbin/policy-rc.d
in_c dpkg -i /pkg/nvshare.deb >"$T/dpkg-i.log" 2>&1
check "dpkg -i installs it (dependencies satisfied by this machine's packages)" [ $? -eq 0 ]
[ -s "$T/dpkg-i.log" ] && grep -iE 'error|warn' "$T/dpkg-i.log" | sed 's/^/# /'
check "... enabled (multi-user.target wants it)" \
  bash -c "[ \"\$(nsenter -a -t $L systemctl is-enabled nvshare-scheduler)\" = enabled ]"
check "... and started: active, Type=notify" wait_for "$(scaled 30)" \
  bash -c "[ \"\$(nsenter -a -t $L systemctl is-active nvshare-scheduler)\" = active ]"
ctl_ok() { in_c nvsharectl --json >/dev/null 2>&1; }
check "nvsharectl (installed) answers the installed scheduler" ctl_ok
check "man nvshare-scheduler, nvsharectl, libnvshare find the pages" \
  bash -c "nsenter -a -t $L env MANPATH=/usr/share/man man -w nvshare-scheduler nvsharectl libnvshare >/dev/null"
check "the scheduler's page lists its options (generated from --help)" \
  bash -c "nsenter -a -t $L zcat -f /usr/share/man/man8/nvshare-scheduler.8.gz | grep -q 'state\\\\-file'"

# 3. The demo against the installed files (the simulated GPU from the build).
in_c env HOME=/root TMPDIR=/tmp NVS_BUILD="$B" NVSHARE_DEMO_SIM=1 \
  NVSHARE_DEMO_LIBRARY=/usr/lib/libnvshare.so NVSHARE_DEMO_SCHEDULER=/usr/sbin/nvshare-scheduler \
  bash "$NVS_ROOT/demo/run-demo.sh" >"$T/demo.log" 2>&1
rc=$?
check "the demo passes with /usr/lib/libnvshare.so and /usr/sbin/nvshare-scheduler (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -q '^demo: OK' '$T/demo.log'"
[ $rc -eq 0 ] || tail -15 "$T/demo.log" | sed 's/^/# /'

# 4. Remove, then purge.
in_c dpkg -L nvshare >"$T/files" 2>&1
echo "x" | in_c tee -a /etc/default/nvshare-scheduler >/dev/null # an operator's edit
in_c dpkg -r nvshare >"$T/dpkg-r.log" 2>&1
check "dpkg -r removes it" [ $? -eq 0 ]
check "... the service stopped and gone (inactive, its unit file removed)" bash -c "
  [ \"\$(nsenter -a -t $L systemctl is-active nvshare-scheduler)\" != active ] &&
  ! nsenter -a -t $L test -e /lib/systemd/system/nvshare-scheduler.service &&
  ! nsenter -a -t $L test -S /run/nvshare/scheduler.sock"
left=$(while read -r f; do
  [ -f "$f" ] || continue
  [ "$f" = /etc/default/nvshare-scheduler ] && continue
  nsenter -a -t "$L" test -e "$f" && echo "$f"
done <"$T/files")
check "... every file gone but the conffile${left:+ (left: $left)}" [ -z "$left" ]
check "... the edited conffile kept" bash -c "nsenter -a -t $L grep -qx x /etc/default/nvshare-scheduler"
in_c dpkg -P nvshare >"$T/dpkg-p.log" 2>&1
check "dpkg -P purges it" [ $? -eq 0 ]
check "... no conffile, no state, no enablement link, no mask left" bash -c "
  ! nsenter -a -t $L test -e /etc/default/nvshare-scheduler &&
  ! nsenter -a -t $L test -e /var/lib/nvshare &&
  ! nsenter -a -t $L test -e /etc/systemd/system/multi-user.target.wants/nvshare-scheduler.service &&
  ! nsenter -a -t $L test -e /etc/systemd/system/nvshare-scheduler.service &&
  [ -z \"\$(nsenter -a -t $L dpkg -l nvshare 2>/dev/null | grep -E '^(ii|rc|iU|iF) +nvshare ')\" ]"
nspawn_stop
nspawn_done
