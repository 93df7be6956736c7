#!/usr/bin/env bash
# The hardened build (Makefile "Hardening"): the daemons and tools are PIE,
# every binary and the library have full RELRO with immediate binding, and
# are compiled with the stack protector and (outside the sanitizer build)
# fortified libc calls. That the library still interposes with immediate
# binding is what every other client test shows.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
command -v readelf >/dev/null || { ok "hardening # skip readelf not installed"; exit 0; }
for f in nvshare-scheduler nvsharectl nvshare-device-plugin libnvshare.so; do
  bin=$B/$f
  if [ ! -f "$bin" ]; then
    ok "$f # skip not built"
    continue
  fi
  check "$f: position independent (ELF type DYN)" sh -c "readelf -h '$bin' | grep -q 'Type:.*DYN'"
  case $f in *.so) ;; *)
    check "$f: an executable (has an interpreter), so PIE" sh -c "readelf -lW '$bin' | grep -q INTERP" ;;
  esac
  check "$f: full RELRO (GNU_RELRO segment)" sh -c "readelf -lW '$bin' | grep -q GNU_RELRO"
  check "$f: immediate binding (BIND_NOW)" sh -c "readelf -d '$bin' | grep -qE 'BIND_NOW|FLAGS.*NOW'"
  check "$f: stack protector" sh -c "nm -D '$bin' | grep -q __stack_chk_fail"
  if [ ! -f "$B/.san" ]; then
    check "$f: fortified libc calls (_FORTIFY_SOURCE)" sh -c "nm -D '$bin' | grep -q '_chk@'"
  fi
done
