#!/usr/bin/env bash
# nvs-test: slow (install paths: 26 make runs into DESTDIR trees)
# Install paths, as far as no cluster or root is needed: make install into a
# DESTDIR lists every expected file (the systemd unit included, the device
# plugin or a clear message that it was not built), STRIP=1 strips, make
# uninstall removes it all; the unit passes systemd-analyze verify; the
# image targets tag with VERSION and the registry; make deploy-images points
# the kustomize base at a registry and kubectl kustomize shows the versioned
# names; the README's and docs/kubernetes.md's Kubernetes commands match the
# repository layout.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
want=$(tr -d ' \t\r\n' <VERSION)
SANV=0
[ -f "$B/.san" ] && SANV=1
# make with the test's build, never rebuilding the artifacts (-o): this test
# is about installing what was built.
ART=(libnvshare.so nvshare-scheduler nvsharectl nvshare-device-plugin nvshare-dra-plugin)
mk() {
  local o=() a
  for a in "${ART[@]}"; do o+=(-o "$B/$a"); done
  make -s --no-print-directory B="$B" SAN=$SANV MAN_BUILD="$T/man" "${o[@]}" "$@"
}

R=$T/root
expect=(usr/local/lib/libnvshare.so usr/local/sbin/nvshare-scheduler usr/local/bin/nvsharectl
  usr/local/lib/systemd/system/nvshare-scheduler.service
  usr/local/share/doc/nvshare/README.md usr/local/share/doc/nvshare/LICENSE
  usr/local/share/doc/nvshare/NOTICE usr/local/share/doc/nvshare/CHANGELOG.md
  usr/local/share/doc/nvshare/examples/nvshare-scheduler.default
  usr/local/share/man/man8/nvshare-scheduler.8 usr/local/share/man/man1/nvsharectl.1
  usr/local/share/man/man7/libnvshare.7)
for d in docs/*.md; do expect+=("usr/local/share/doc/nvshare/$d"); done
if [ -x "$B/nvshare-device-plugin" ]; then
  expect+=(usr/local/sbin/nvshare-device-plugin usr/local/share/man/man8/nvshare-device-plugin.8)
fi
if [ -x "$B/nvshare-dra-plugin" ]; then
  expect+=(usr/local/sbin/nvshare-dra-plugin usr/local/share/man/man8/nvshare-dra-plugin.8)
fi
if mk install DESTDIR="$R" >"$T/install.log" 2>&1; then
  ok "make install DESTDIR=... succeeds"
else
  not_ok "make install"; sed 's/^/# /' "$T/install.log"
fi
got=$(cd "$R" 2>/dev/null && find . -type f | sed 's#^\./##' | sort)
exp=$(printf '%s\n' "${expect[@]}" | sort)
check "installed exactly: $(echo "$exp" | tr '\n' ' ')" [ "$got" = "$exp" ]
[ "$got" = "$exp" ] || diff <(echo "$exp") <(echo "$got") | sed 's/^/# /'
check "programs executable, unit and documents 0644" bash -c "
  [ -x '$R/usr/local/sbin/nvshare-scheduler' ] && [ -x '$R/usr/local/bin/nvsharectl' ] &&
  [ \"\$(stat -c %a '$R/usr/local/lib/systemd/system/nvshare-scheduler.service')\" = 644 ] &&
  [ \"\$(stat -c %a '$R/usr/local/share/doc/nvshare/LICENSE')\" = 644 ]"
# Man pages: the programs' generated from their --help (every long option
# there is in the page), the library's names every client variable of the
# README's "Client" table.
M=$R/usr/local/share/man
for pg in "nvshare-scheduler man8/nvshare-scheduler.8" "nvsharectl man1/nvsharectl.1" \
  "nvshare-device-plugin man8/nvshare-device-plugin.8" "nvshare-dra-plugin man8/nvshare-dra-plugin.8"; do
  read -r prog page <<<"$pg"
  [ -x "$B/$prog" ] || continue
  opts=$("$B/$prog" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
  miss=$(for o in $opts; do grep -qF -- "${o//-/\\-}" "$M/$page" || echo "$o"; done | tr '\n' ' ')
  check "man $page: every option of $prog --help${miss:+ (missing: $miss)}" [ -z "$miss" ]
done
check "the man pages render without groff warnings" bash -c "
  for f in '$M'/man*/*; do out=\$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l \"\$f\" 2>&1 >/dev/null); [ -z \"\$out\" ] || { echo \"\$f: \$out\"; exit 1; }; done"
vars=$(sed -n '/^\*\*Client\*\*/,/^\*\*Scheduler/p' README.md | grep -oE '^\| `NVSHARE_[A-Z_]+`(, `NVSHARE_[A-Z_]+`)*' | grep -oE 'NVSHARE_[A-Z_]+' | sort -u)
miss=$(for v in $vars; do grep -qF "$v" "$M/man7/libnvshare.7" || echo "$v"; done | tr '\n' ' ')
check "man libnvshare(7) names every client variable of the README ($(echo $vars | wc -w))${miss:+ (missing: $miss)}" \
  bash -c "[ -n '$vars' ] && [ -z '$miss' ]"
out=$("$R/usr/local/sbin/nvshare-scheduler" --version 2>&1)
check "the installed scheduler runs (--version: $out)" bash -c "[[ '$out' == 'nvshare-scheduler $want'* ]]"
U=$R/usr/local/lib/systemd/system/nvshare-scheduler.service
check "unit: ExecStart is the installed scheduler" grep -qx 'ExecStart=/usr/local/sbin/nvshare-scheduler' "$U"
check "unit: /var/run/nvshare as RuntimeDirectory (0755), no ProtectProc/PrivateUsers/PrivateDevices" \
  bash -c "grep -qx 'RuntimeDirectory=nvshare nvshare-admin' '$U' && grep -qx 'RuntimeDirectoryMode=0755' '$U' &&
    ! grep -qE '^(ProtectProc=invisible|PrivateUsers=yes|PrivateDevices=yes)' '$U'"
if command -v systemd-analyze >/dev/null; then
  # verify wants ExecStart to exist on this machine: check a copy that
  # points at the installed file.
  sed "s#^ExecStart=.*#ExecStart=$R/usr/local/sbin/nvshare-scheduler#" "$U" >"$T/nvshare-scheduler.service"
  if out=$(systemd-analyze verify "$T/nvshare-scheduler.service" 2>&1); then
    ok "systemd-analyze verify the unit"
  else
    not_ok "systemd-analyze verify"; echo "$out" | sed 's/^/# /'
  fi
else
  ok "systemd-analyze verify # SKIP systemd-analyze not installed"
fi

if [ -x "$B/nvshare-device-plugin" ]; then
  check "the device plugin was installed (it was built)" [ -x "$R/usr/local/sbin/nvshare-device-plugin" ]
else
  ok "device plugin not built here: checked below with a build directory without it"
fi

mk uninstall DESTDIR="$R" >"$T/uninstall.log" 2>&1
left=$(find "$R" -type f 2>/dev/null)
check "make uninstall removes every installed file" bash -c "[ -z '$left' ]"

# PREFIX, SYSTEMD_UNIT_DIR and STRIP.
R2=$T/root2
mk install DESTDIR="$R2" PREFIX=/opt/nvs SYSTEMD_UNIT_DIR=/etc/systemd/system STRIP=1 >"$T/install2.log" 2>&1
check "PREFIX=/opt/nvs SYSTEMD_UNIT_DIR=/etc/systemd/system: unit there, pointing into PREFIX" \
  grep -qx 'ExecStart=/opt/nvs/sbin/nvshare-scheduler' "$R2/etc/systemd/system/nvshare-scheduler.service"
if command -v readelf >/dev/null; then
  check "STRIP=1: installed programs have no symbol table, the library keeps its version string" \
    bash -c "! readelf -S '$R2/opt/nvs/sbin/nvshare-scheduler' | grep -q '\.symtab' &&
      ! readelf -S '$R2/opt/nvs/lib/libnvshare.so' | grep -q '\.symtab' &&
      grep -aq 'nvshare-version $want' '$R2/opt/nvs/lib/libnvshare.so'"
  check "without STRIP the symbol table stays" bash -c "readelf -S '$B/nvshare-scheduler' | grep -q '\.symtab'"
fi
mk uninstall DESTDIR="$R2" PREFIX=/opt/nvs SYSTEMD_UNIT_DIR=/etc/systemd/system >/dev/null 2>&1
check "make uninstall with the same variables removes it all" bash -c "[ -z \"\$(find '$R2' -type f)\" ]"

# A build directory without the device plugin (and make told that gRPC is
# missing): install says so clearly, and installs the rest.
NB=$T/nodp
mkdir -p "$NB"
for a in libnvshare.so nvshare-scheduler nvsharectl; do cp "$B/$a" "$NB/"; done
make -s --no-print-directory B="$NB" DP_LIBS= -o "$NB/libnvshare.so" -o "$NB/nvshare-scheduler" \
  -o "$NB/nvsharectl" install DESTDIR="$T/root3" >"$T/install3.out" 2>"$T/install3.err"
rc=$?
check "without the plugin: install still succeeds (rc $rc) with the other files" \
  bash -c "[ $rc -eq 0 ] && [ -x '$T/root3/usr/local/sbin/nvshare-scheduler' ] &&
    [ ! -e '$T/root3/usr/local/sbin/nvshare-device-plugin' ]"
# Without help2man: the rest installed, the programs' pages left out, said so.
make -s --no-print-directory B="$NB" DP_LIBS= HELP2MAN=/nonexistent/help2man MAN_BUILD="$T/man4" \
  -o "$NB/libnvshare.so" -o "$NB/nvshare-scheduler" -o "$NB/nvsharectl" install DESTDIR="$T/root4" \
  >/dev/null 2>"$T/install4.err"
rc=$?
check "without help2man: install succeeds (rc $rc), says the man pages were NOT installed and how to get them" \
  bash -c "[ $rc -eq 0 ] && [ -x '$T/root4/usr/local/sbin/nvshare-scheduler' ] &&
    [ -f '$T/root4/usr/local/share/man/man7/libnvshare.7' ] &&
    [ ! -e '$T/root4/usr/local/share/man/man8/nvshare-scheduler.8' ] &&
    grep -q 'man pages NOT installed: help2man is missing' '$T/install4.err'"
check "without the plugin: stderr says it was NOT installed, why, and how to get it" \
  bash -c "grep -q 'nvshare-device-plugin NOT installed: it was not built' '$T/install3.err' &&
    grep -q 'libgrpc-dev' '$T/install3.err'"
[ -s "$T/install3.err" ] && sed 's/^/# /' "$T/install3.err"

# Images: the targets tag with VERSION, under the registry when one is given.
make -s -n --no-print-directory images REGISTRY=reg.example:5000/team CONTAINER_TOOL=buildah \
  IMAGE_ARCH=amd64 >"$T/images.n" 2>&1
n=$(grep -cE -- "-t reg\.example:5000/team/nvshare/(scheduler|device-plugin|library):$want " "$T/images.n")
nb=$(grep -c '^buildah build ' "$T/images.n")
check "make images REGISTRY=R: three buildah builds tagged R/nvshare/<image>:$want ($nb, $n)" \
  [ "$n:$nb" = 3:3 ]
n=$(make -s -n --no-print-directory images-push REGISTRY=reg.example:5000/team CONTAINER_TOOL=buildah \
  IMAGE_ARCH=amd64 2>/dev/null | grep -c 'buildah push reg.example:5000/team/nvshare/$i:'"$want")
check "make images-push REGISTRY=R pushes those names" [ "$n" = 1 ]
n=$(make -s -n --no-print-directory images CONTAINER_TOOL=buildah IMAGE_ARCH=amd64 2>/dev/null |
  grep -cE -- "-t localhost/nvshare/(scheduler|device-plugin|library):$want ")
check "make images without REGISTRY: local names localhost/nvshare/<image> ($n)" [ "$n" = 3 ]
if make -s -n images-push >/dev/null 2>"$T/push.err"; then
  not_ok "images-push without REGISTRY refused"
else
  check "images-push without REGISTRY refused before building (says REGISTRY)" grep -q 'set REGISTRY' "$T/push.err"
fi

# kustomize: the base names VERSION; deploy-images points it at a registry.
if command -v kubectl >/dev/null; then
  imgs=$(kubectl kustomize deploy/kubernetes 2>&1 | sed -n 's/^ *image: *//p' | sort -u | tr '\n' ' ')
  l=localhost/nvshare
  check "kubectl kustomize deploy/kubernetes: $l/*:$want, no registry's namespace ($imgs)" \
    [ "$imgs" = "$l/device-plugin:$want $l/library:$want $l/scheduler:$want " ]
  cp -r deploy/kubernetes "$T/k"
  make -s --no-print-directory deploy-images REGISTRY=reg.example:5000/team \
    KUSTOMIZATION="$T/k/kustomization.yaml" >/dev/null 2>&1
  imgs=$(kubectl kustomize "$T/k" 2>&1 | sed -n 's/^ *image: *//p' | sort -u | tr '\n' ' ')
  r=reg.example:5000/team/nvshare
  check "make deploy-images REGISTRY=R; kubectl kustomize: R/nvshare/*:$want ($imgs)" \
    [ "$imgs" = "$r/device-plugin:$want $r/library:$want $r/scheduler:$want " ]
  check "deploy-images leaves the repository's kustomization alone (a copy was edited)" \
    git diff --quiet -- deploy/kubernetes/kustomization.yaml
else
  not_ok "kubectl not installed: cannot render (apt-get install kubernetes-client)"
fi

# The documents' Kubernetes commands, run from the repository root: every
# `kubectl apply -k DIR` names a directory with a kustomization, no `cd`
# into it first, every make target they use exists.
for doc in README.md docs/kubernetes.md; do
  dirs=$(grep -oE 'kubectl apply -k [^ `]+' "$doc" | awk '{print $4}' | sort -u)
  bad=
  for d in $dirs; do [ -f "$d/kustomization.yaml" ] || bad="$bad $d"; done
  check "$doc: kubectl apply -k names kustomize directories of the repository (${dirs//$'\n'/ })" \
    bash -c "[ -n '$dirs' ] && [ -z '$bad' ]"
  check "$doc: no 'cd deploy/kubernetes' before a path relative to the root" \
    bash -c "! grep -qE '^cd deploy/kubernetes' '$doc'"
  for t in $(grep -oE '^make( [A-Za-z_]+=[^ ]+)* [a-z][a-z-]+' "$doc" | awk '{print $NF}' | sort -u); do
    check "$doc: make $t is a target" bash -c "make -n $t REGISTRY=r >/dev/null 2>&1 || make -n $t >/dev/null 2>&1"
  done
done
echo "1..$_tap_n"
