#!/usr/bin/env bash
# build.sh ROOT VERSION ARCH OUT.deb: turns a `make install` tree (PREFIX=/usr)
# into a Debian package (deploy/deb/module.mk).
set -euo pipefail
root=$1 version=$2 arch=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
install -D -m 0644 "$here/../systemd/nvshare-scheduler.default" "$root/etc/default/nvshare-scheduler"
install -D -m 0644 "$here/copyright" "$root/usr/share/doc/nvshare/copyright"
# Debian keeps man pages and changelogs compressed (gzip -9n: reproducible).
find "$root/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +
gzip -9n "$root/usr/share/doc/nvshare/CHANGELOG.md"
mkdir -p "$root/DEBIAN"
for s in postinst prerm postrm; do install -m 0755 "$here/$s" "$root/DEBIAN/$s"; done
echo /etc/default/nvshare-scheduler >"$root/DEBIAN/conffiles"

# Depends: what the ELF files need, as dpkg-shlibdeps works it out (it wants
# a debian/control beside it).
elfs=()
while IFS= read -r f; do
  head -c 4 "$f" | grep -q ELF && elfs+=("$f")
done < <(find "$root/usr" -type f)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debian"
printf 'Source: nvshare\n\nPackage: nvshare\nArchitecture: any\n' >"$tmp/debian/control"
abs=()
for f in "${elfs[@]}"; do abs+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); done
deps=$(cd "$tmp" && dpkg-shlibdeps -O "${abs[@]}" 2>"$tmp/shlibdeps.err" | sed -n 's/^shlibs:Depends=//p') || {
  cat "$tmp/shlibdeps.err" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: nvshare
Version: $version
Architecture: $arch
Section: admin
Priority: optional
Maintainer: nvshare authors <nvshare@localhost>
Installed-Size: $size
Depends: $deps, init-system-helpers (>= 1.52)
Description: GPU sharing for unmodified CUDA applications
 nvshare lets several processes or Kubernetes Pods share one GPU, each seeing
 the whole GPU memory: allocations become CUDA Unified Memory, and a node
 scheduler runs the clients together while their memory fits and hands the
 GPU to one at a time when it does not. Applications are unchanged:
 LD_PRELOAD=/usr/lib/libnvshare.so python train.py.
 .
 This package: libnvshare.so, nvshare-scheduler (enabled as
 nvshare-scheduler.service), nvsharectl, nvshare-device-plugin,
 nvshare-dra-plugin, their man pages and the documentation.
CONTROL
mkdir -p "$(dirname "$out")"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "built $out ($(du -k "$out" | cut -f1) KiB); Depends: $deps"
