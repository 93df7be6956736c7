#!/bin/sh
# nvshare-install-library: the entry point of the nvshare library image.
# Copies libnvshare.so into a node directory (a hostPath volume), from
# which nvshare-device-plugin's Allocate mounts it into containers.
#
# The copy is atomic (temporary file + rename in the same directory), so a
# container that already loaded the library keeps its copy and a container
# starting meanwhile sees either the old or the new file, never half of one.
set -eu
SRC_DIR=${NVSHARE_LIB_SRC:-/usr/local/nvshare/lib}
NAME=libnvshare.so

usage() {
  cat <<USAGE
Usage: nvshare-install-library [DEST_DIR]
       nvshare-install-library --version

Copies $SRC_DIR/$NAME to DEST_DIR/$NAME (default: \$NVSHARE_LIB_DEST, else
/host/var/lib/nvshare/lib), atomically; does nothing when DEST_DIR already
holds an identical copy. Mount the node's /var/lib/nvshare/lib at DEST_DIR.
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  -V|--version)
    # The version of the library in this image (written when it was staged).
    v=$(cat "${NVSHARE_VERSION_FILE:-/usr/local/nvshare/VERSION}" 2>/dev/null) || v=unknown
    echo "nvshare-install-library $v"
    exit 0
    ;;
  -*) usage >&2; exit 2 ;;
esac
dest=${1:-${NVSHARE_LIB_DEST:-/host/var/lib/nvshare/lib}}
src=$SRC_DIR/$NAME
if [ ! -r "$src" ]; then
  echo "nvshare-install-library: $src missing from the image" >&2
  exit 1
fi
if [ ! -d "$dest" ]; then
  echo "nvshare-install-library: $dest is not a directory (mount the node's library directory there)" >&2
  exit 1
fi
if [ -f "$dest/$NAME" ] && cmp -s "$src" "$dest/$NAME"; then
  echo "nvshare-install-library: $dest/$NAME is up to date"
  exit 0
fi
tmp=$dest/.$NAME.tmp.$$
trap 'rm -f "$tmp"' EXIT
cp "$src" "$tmp"
chmod 0755 "$tmp"
mv -f "$tmp" "$dest/$NAME"
trap - EXIT
echo "nvshare-install-library: installed $dest/$NAME"
