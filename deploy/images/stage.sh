#!/bin/sh
# Stages the files of one container image from build artifacts:
#
#   stage.sh [--no-deps] CONTEXT ARCH SRC:DEST [SRC:DEST...]
#
# Copies each SRC to CONTEXT/rootfs-ARCH/DEST (DEST ending in / keeps the
# name), then, unless --no-deps, every shared library the ELF files need,
# recursively (readelf NEEDED, so it also works for cross builds), into
# CONTEXT/rootfs-ARCH/usr/lib/<triplet>/ under its soname. Libraries that
# every glibc base image has (glibc itself, libgcc_s, libstdc++) are left
# to the base image, which must therefore be glibc >= the build host's
# (Debian bookworm or newer). The Debian packages the copied libraries come
# from are listed in usr/share/doc/nvshare/bundled-packages.txt, and their
# copyright files copied to usr/share/doc/<package>/copyright; nvshare's
# LICENSE and NOTICE go to usr/share/doc/nvshare in every image.
#
# ARCH is a Debian/OCI architecture name: amd64, arm64. Extra library
# directories to search: STAGE_LIB_DIRS (colon-separated; for a cross
# sysroot).
set -eu

nodeps=0
if [ "${1:-}" = "--no-deps" ]; then nodeps=1; shift; fi
if [ $# -lt 3 ]; then
  echo "usage: $0 [--no-deps] CONTEXT ARCH SRC:DEST..." >&2
  exit 2
fi
ctx=$1 arch=$2
shift 2
case $arch in
  amd64) triplet=x86_64-linux-gnu ;;
  arm64) triplet=aarch64-linux-gnu ;;
  *) echo "stage.sh: unsupported architecture $arch" >&2; exit 2 ;;
esac
root=$ctx/rootfs-$arch
rm -rf "$root"
mkdir -p "$root"

elfs=""
for spec in "$@"; do
  src=${spec%%:*} dest=${spec#*:}
  case $dest in */) dest=$dest$(basename "$src") ;; esac
  mkdir -p "$root$(dirname "$dest")"
  cp -L "$src" "$root$dest"
  if head -c 4 "$src" | grep -q 'ELF'; then elfs="$elfs $root$dest"; fi
done
# nvshare's license texts in every image.
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/usr/share/doc/nvshare"
cp "$top/LICENSE" "$top/NOTICE" "$root/usr/share/doc/nvshare/"
[ $nodeps = 1 ] && exit 0

# Provided by the base image.
base_lib() {
  case $1 in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*) return 0 ;;
    ld-linux*|ld64.so.*|libgcc_s.so.*|libstdc++.so.*|libutil.so.*|libanl.so.*) return 0 ;;
  esac
  return 1
}

dirs="${STAGE_LIB_DIRS:+$STAGE_LIB_DIRS:}/usr/lib/$triplet:/lib/$triplet:/usr/lib:/lib"
find_lib() {
  old_ifs=$IFS; IFS=:
  for d in $dirs; do
    if [ -e "$d/$1" ]; then IFS=$old_ifs; echo "$d/$1"; return 0; fi
  done
  IFS=$old_ifs
  return 1
}

libdir=$root/usr/lib/$triplet
mkdir -p "$libdir"
todo=$elfs
seen=" "
pkgs=""
while [ -n "$todo" ]; do
  next=""
  for f in $todo; do
    for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case $seen in *" $lib "*) continue ;; esac
      seen="$seen$lib "
      base_lib "$lib" && continue
      path=$(find_lib "$lib") || { echo "stage.sh: $lib (needed by $f) not found" >&2; exit 1; }
      cp -L "$path" "$libdir/$lib"
      next="$next $libdir/$lib"
      if command -v dpkg >/dev/null; then
        p=$(dpkg -S "$path" 2>/dev/null | head -n1 | cut -d: -f1) || p=
        if [ -z "$p" ]; then
          # merged /usr: dpkg may know the file under /lib or /usr/lib.
          real=$(readlink -f "$path")
          p=$(dpkg -S "$real" 2>/dev/null | head -n1 | cut -d: -f1) || p=
          [ -n "$p" ] || p=$(dpkg -S "*/$(basename "$real")" 2>/dev/null | head -n1 | cut -d: -f1) || p=
        fi
        [ -n "$p" ] && pkgs="$pkgs $p"
      fi
    done
  done
  todo=$next
done
for p in $pkgs; do echo "$p"; done | sort -u >"$root/usr/share/doc/nvshare/bundled-packages.txt"
# The license of each bundled library: its Debian package's copyright file,
# where Debian keeps it (/usr/share/doc/<package>/copyright).
while read -r p; do
  [ -n "$p" ] || continue
  if [ -f "/usr/share/doc/$p/copyright" ]; then
    mkdir -p "$root/usr/share/doc/$p"
    cp "/usr/share/doc/$p/copyright" "$root/usr/share/doc/$p/copyright"
  else
    echo "stage.sh: no /usr/share/doc/$p/copyright for bundled package $p" >&2
    exit 1
  fi
done <"$root/usr/share/doc/nvshare/bundled-packages.txt"
