#!/usr/bin/env bash
# nvs-test: long
# Container images (deploy/images): builds each image with buildah through
# the real make targets (deploy/module.mk) on a base image made here from
# the host's own files (no registry is reachable in CI), then runs each
# image's ENTRYPOINT with --help inside it (buildah run), and the library
# installer for real. buildah: vfs storage in a private directory, chroot
# isolation, so no daemon and no user namespaces are needed (root).
#
# Skips only when buildah is installed but cannot create a container here
# (e.g. unprivileged without subuid ranges); fails when it is missing.
# Skipped under the sanitizer build: images are made from the normal build.
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
if [ -f "$B/.san" ]; then
  ok "container images # SKIP images are built from the non-sanitizer build"
  exit 0
fi
if ! command -v buildah >/dev/null; then
  not_ok "buildah not installed (apt-get install buildah)"; exit 1
fi
for f in nvshare-scheduler nvsharectl nvshare-device-plugin nvshare-dra-plugin libnvshare.so; do
  [ -f "$B/$f" ] || { not_ok "$B/$f not built"; exit 1; }
done
export BUILDAH_ISOLATION=chroot STORAGE_DRIVER=vfs
BH="buildah --root $T/storage --runroot $T/run --storage-driver vfs"
bh() { $BH "$@"; }
# Leave no containers behind; the storage goes with $T.
trap 'bh rm -a >/dev/null 2>&1; bh rmi -a -f >/dev/null 2>&1; cleanup' EXIT

if ! probe=$(bh from scratch 2>&1); then
  ok "container images # SKIP buildah cannot create a container here: $(echo "$probe" | tail -n1)"
  exit 0
fi
bh rm -a >/dev/null 2>&1

# Base image: what debian:bookworm-slim offers the images (a shell,
# coreutils' cp/mv/mkdir/rm/chmod/cat/ls, cmp, all of glibc, libgcc_s,
# libstdc++), copied from this (bookworm) host.
R=$T/baseroot
mkdir -p "$R/tmp" "$R/etc" "$R/root" "$R/usr/bin" "$R/usr/lib" "$R/usr/lib64"
chmod 1777 "$R/tmp"
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"
# Merged /usr, as in Debian: /bin, /lib, /lib64 are links into /usr.
for d in bin lib lib64; do ln -s "usr/$d" "$R/$d"; done
put() { # host file -> same path under /usr in the base
  local dst=$1
  case $dst in /usr/*) ;; *) dst=/usr$dst ;; esac
  mkdir -p "$R$(dirname "$dst")"
  cp -L "$1" "$R$dst"
}
for b in sh cp mv mkdir rm chmod cat ls cmp; do
  f=$(command -v $b)
  put "$f"
  for lib in $(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    put "$lib"
  done
done
# All of glibc's libraries (Debian's libc6 package), as the slim image has.
for lib in $(dpkg -L libc6 2>/dev/null | grep -E '/lib[^/]*\.so(\.[0-9]+)*$|/ld-linux[^/]*$'); do
  [ -f "$lib" ] && put "$lib"
done
for l in libgcc_s.so.1 libstdc++.so.6; do
  p=$(ldconfig -p | awk -v l="$l" '$1 == l && /x86-64|AArch64/ {print $NF; exit}')
  [ -n "$p" ] && put "$p"
done
start=$(date +%s)
if c=$(bh from scratch 2>"$T/base.err") && bh copy "$c" "$R" / >/dev/null 2>>"$T/base.err" &&
   bh commit -q "$c" localhost/nvshare-test-base:latest >/dev/null 2>>"$T/base.err"; then
  ok "base image from host files (no registry)"
else
  not_ok "base image"; sed 's/^/# /' "$T/base.err"; exit 1
fi
bh rm -a >/dev/null 2>&1

# The images, through the make targets.
MK="-f Makefile"
grep -q 'deploy/module.mk' Makefile || MK="$MK -f deploy/module.mk"
for img in scheduler device-plugin library; do
  if make -s $MK B="$B" IMAGE_CONTEXT="$T/ctx" CONTAINER_TOOL="$BH" \
       IMAGE_BASE=localhost/nvshare-test-base:latest IMAGE_REPO=localhost/nvshare IMAGE_TAG=test \
       "image-$img" >"$T/build-$img.log" 2>&1; then
    ok "make image-$img (buildah)"
  else
    not_ok "make image-$img"; tail -n 20 "$T/build-$img.log" | sed 's/^/# /'
    continue
  fi
  labels=$(bh inspect --type image --format '{{range $k, $v := .OCIv1.Config.Labels}}{{$k}}={{$v}}
{{end}}' "localhost/nvshare/$img:test" 2>/dev/null)
  check "nvshare/$img: OCI labels (title, version, revision, licenses)" bash -c "
    grep -qx 'org.opencontainers.image.title=nvshare-$img' <<<\"\$1\" &&
    grep -qx 'org.opencontainers.image.version=test' <<<\"\$1\" &&
    grep -qx 'org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)' <<<\"\$1\" &&
    grep -qx 'org.opencontainers.image.licenses=Apache-2.0' <<<\"\$1\"" _ "$labels"
  st=$(echo "$T/ctx/$img/rootfs-"*)
  lic_missing=$(while read -r p; do [ -z "$p" ] || [ -f "$st/usr/share/doc/$p/copyright" ] || echo "$p"; done \
    <"$st/usr/share/doc/nvshare/bundled-packages.txt" 2>/dev/null)
  check "nvshare/$img: LICENSE, NOTICE and each bundled package's copyright file${lic_missing:+ (missing: $lic_missing)}" \
    bash -c "[ -f '$st/usr/share/doc/nvshare/LICENSE' ] && [ -f '$st/usr/share/doc/nvshare/NOTICE' ] && [ -z '$lic_missing' ]"
  ep=$(bh inspect --type image --format '{{range .OCIv1.Config.Entrypoint}}{{.}} {{end}}' \
       "localhost/nvshare/$img:test" 2>/dev/null)
  ep=${ep% }
  ctr=$(bh from --pull-never "localhost/nvshare/$img:test" 2>"$T/from.err") || {
    not_ok "buildah from nvshare/$img"; sed 's/^/# /' "$T/from.err"; continue; }
  # shellcheck disable=SC2086
  if out=$(bh run "$ctr" -- $ep --help 2>&1) && echo "$out" | grep -q '^Usage'; then
    ok "nvshare/$img: ENTRYPOINT ($ep) --help runs inside the image"
  else
    not_ok "nvshare/$img: ENTRYPOINT ($ep) --help"; echo "$out" | tail -n 10 | sed 's/^/# /'
  fi
  case $img in
    scheduler)
      # As an operator does with kubectl exec in the scheduler Pod: the
      # image's nvsharectl talks to the image's scheduler over the admin
      # socket (its default directory, /var/run/nvshare-admin).
      if out=$(bh run "$ctr" -- /bin/sh -c "$ep --no-nvml --no-kube --state-file none >/tmp/s.log 2>&1 &
            i=0; while [ ! -S /var/run/nvshare-admin/admin.sock ] && [ \$i -lt 500000 ]; do i=\$((i + 1)); done
            nvsharectl --json; rc=\$?; kill \$! 2>/dev/null; exit \$rc" 2>&1) &&
         echo "$out" | grep -q '"gpus"'; then
        ok "nvshare/scheduler: nvsharectl in the image answers from the admin socket (kubectl exec)"
      else
        not_ok "nvshare/scheduler: nvsharectl in the image"; echo "$out" | tail -n 10 | sed 's/^/# /'
      fi ;;
    library)
      if out=$(bh run "$ctr" -- /bin/sh -c 'mkdir -p /tmp/dest &&
            /usr/local/bin/nvshare-install-library /tmp/dest &&
            cmp /usr/local/nvshare/lib/libnvshare.so /tmp/dest/libnvshare.so &&
            /usr/local/bin/nvshare-install-library /tmp/dest' 2>&1) &&
         echo "$out" | grep -q 'up to date'; then
        ok "nvshare/library: installs libnvshare.so into a directory, then finds it up to date"
      else
        not_ok "nvshare/library install"; echo "$out" | sed 's/^/# /'
      fi
      out=$(bh run "$ctr" -- /usr/local/bin/nvshare-install-library --version 2>&1)
      check "nvshare/library: nvshare-install-library --version names the library's version ($out)" \
        bash -c "[ '$out' = 'nvshare-install-library $(scripts/gen-version.sh --print)' ]" ;;
    device-plugin)
      st=$(echo "$T/ctx/device-plugin/rootfs-"*)
      if compgen -G "$st/usr/lib/*/libgrpc.so.29" >/dev/null &&
         ! compgen -G "$st/usr/lib/*/libc.so.6" >/dev/null &&
         grep -q libgrpc "$st/usr/share/doc/nvshare/bundled-packages.txt"; then
        ok "nvshare/device-plugin: bundles gRPC's libraries (packages listed), not glibc"
      else
        not_ok "nvshare/device-plugin: bundled libraries"; ls -R "$st" | head -20 | sed 's/^/# /'
      fi
      # components/dra runs the DRA driver from this image (libcurl too).
      if out=$(bh run "$ctr" -- /usr/local/bin/nvshare-dra-plugin --help 2>&1) && echo "$out" | grep -q '^Usage'; then
        ok "nvshare/device-plugin: nvshare-dra-plugin --help runs inside the image"
      else
        not_ok "nvshare/device-plugin: nvshare-dra-plugin --help"; echo "$out" | tail -n 10 | sed 's/^/# /'
      fi ;;
  esac
done
diag "images built and run in $(( $(date +%s) - start ))s"
