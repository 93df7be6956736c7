#!/usr/bin/env bash
# nvs-test: long (downloads Debian 11's glibc, ~6 MB, with apt)
# libnvshare.so loads under a glibc older than 2.34 (issue 34, item 2):
# Debian 11's glibc 2.31 (its libc6 and libc-bin packages, fetched with
# apt-get download into a private directory; nothing is installed) runs its
# own programs with the library preloaded, exactly as without it. Before
# the floor (common/glibc_floor.h) every one of them stopped at exec with
# "version `GLIBC_2.34' not found"; a library built plainly on this
# machine still does, which the test shows as its control.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
if [ -f "$B/.san" ]; then ok "# SKIP sanitizer build (never shipped; its ASan runtime needs this glibc)"; echo "1..$_tap_n"; exit 0; fi
arch=$(dpkg --print-architecture 2>/dev/null)
case "$arch" in
  amd64) triple=x86_64-linux-gnu ;;
  arm64) triple=aarch64-linux-gnu ;;
  *) ok "# SKIP no Debian 11 glibc for architecture '${arch:-unknown}'"; echo "1..$_tap_n"; exit 0 ;;
esac

A=$T/apt
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/dl"
: >"$A/status"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main" \
  >"$A/sources.list"
APT=(-o "Dir::Etc::sourcelist=$A/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$A/lists"
  -o "Dir::Cache=$A/cache" -o "Dir::State::status=$A/status" -o APT::Sandbox::User=root -q)
if ! timeout 300 apt-get "${APT[@]}" update >"$A/update.log" 2>&1 ||
   ! (cd "$A/dl" && timeout 300 apt-get "${APT[@]}" download libc6 libc-bin >"$A/download.log" 2>&1); then
  # CI and every developer machine reach Debian's archive; only a machine
  # cut off from it cannot run this test.
  not_ok "fetch Debian 11's libc6 and libc-bin with apt-get: $(tail -2 "$A/update.log" "$A/download.log" 2>/dev/null | tr '\n' ' ')"
  echo "1..$_tap_n"; exit 0
fi
R=$T/root
for d in "$A"/dl/*.deb; do dpkg-deb -x "$d" "$R"; done
L=$R/lib/$triple
LDSO=$(ls "$L"/ld-2.*.so 2>/dev/null | head -1)
check "Debian 11's glibc unpacked ($(basename "${LDSO:-none}"))" [ -x "${LDSO:-/nonexistent}" ]
ver=$("$LDSO" --library-path "$L" "$R/usr/bin/getconf" GNU_LIBC_VERSION 2>&1)
check "its getconf runs on its own glibc ($ver)" bash -c "[[ '$ver' == 'glibc 2.'* ]] && [ \"\$(printf '%s\n' '${ver#glibc }' 2.33 | sort -V | tail -1)\" = 2.33 ]"

# old NAME PRELOAD ARGS...: an old program, under the old loader and libc.
old() { local p=$1; shift; LD_PRELOAD=$p "$LDSO" --library-path "$L" "$@"; }
for cmd in "getconf GNU_LIBC_VERSION" "getent passwd root" "getent hosts localhost" "locale"; do
  read -r -a argv <<<"$cmd"
  argv[0]=$R/usr/bin/${argv[0]}
  a=$(old "" "${argv[@]}" 2>&1 | md5sum); ra=${PIPESTATUS[0]}
  b=$(old "$LIBNVSHARE" "${argv[@]}" 2>"$T/err" | md5sum); rb=${PIPESTATUS[0]}
  check "glibc ${ver#glibc }: '$cmd' runs unchanged with libnvshare.so preloaded (exit $rb)" \
    bash -c "[ '$ra' = '$rb' ] && [ '$a' = '$b' ] && [ ! -s '$T/err' ]"
  [ -s "$T/err" ] && head -3 "$T/err" | sed 's/^/# /'
done

# Control: a library built plainly here (pthread_create@GLIBC_2.34) is
# refused by that loader, as libnvshare.so was before its floor.
printf '#include <pthread.h>\nstatic void *f(void *a) { return a; }\nint p(void) { pthread_t t; return pthread_create(&t, 0, f, 0); }\n' >"$T/plain.c"
if ${CC:-gcc} -shared -fPIC -o "$T/plain.so" "$T/plain.c" && objdump -T "$T/plain.so" | grep -q GLIBC_2.34; then
  old "$T/plain.so" "$R/usr/bin/getconf" GNU_LIBC_VERSION >/dev/null 2>"$T/plain.err"; rc=$?
  check "control: a plainly built library stops the same program (exit $rc: $(head -1 "$T/plain.err"))" \
    bash -c "[ $rc -ne 0 ] && grep -q \"version .GLIBC_2.34' not found\" '$T/plain.err'"
fi
echo "1..$_tap_n"
