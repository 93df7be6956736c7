#!/usr/bin/env bash
# The library's glibc floor (issue 34, item 2; common/glibc_floor.h): it
# needs no symbol version above GLIBC_2.17, the check that the build runs
# (client/check_glibc.sh) fails on a library that does, and preloading it
# changes nothing for a process that never touches CUDA: exit status,
# output, silence on stderr. tests/client/t_old_glibc.sh (long tier) loads
# it under a real pre-2.34 glibc.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
CHK=client/check_glibc.sh
# The sanitizer build is never shipped and preloads the ASan runtime,
# which needs this machine's glibc: only the check itself is tested there.
SAN=0
[ -f "$B/.san" ] && SAN=1

if [ $SAN = 1 ]; then
  ok "# SKIP the floor of the sanitizer build (never shipped; its ASan runtime needs this glibc)"
else
  out=$($CHK "$LIBNVSHARE" 2.17 2>&1)
  check "libnvshare.so needs nothing above GLIBC_2.17 ($out)" [ $? -eq 0 ]
  check "... and names libdl/libpthread (where old glibcs keep dlopen, pthread_create)" \
    bash -c "readelf -d '$LIBNVSHARE' | grep -q 'NEEDED.*libdl.so.2' && readelf -d '$LIBNVSHARE' | grep -q 'NEEDED.*libpthread.so.0'"
fi

# The check can fail: a library calling pthread_create and dlopen, built
# plainly on this glibc (2.34 or later), needs GLIBC_2.34; built with the
# floor header it does not.
cat >"$T/probe.c" <<'C'
#include <dlfcn.h>
#include <pthread.h>
static void *f(void *a) { return a; }
int nvs_probe(void)
{
	pthread_t t;
	return pthread_create(&t, 0, f, dlopen("libm.so.6", RTLD_NOW));
}
C
if ${CC:-gcc} -shared -fPIC -o "$T/plain.so" "$T/probe.c" 2>"$T/cc.err" &&
   ${CC:-gcc} -shared -fPIC -include common/glibc_floor.h -o "$T/pinned.so" "$T/probe.c" \
     -Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 2>>"$T/cc.err"; then
  if objdump -T "$T/plain.so" | grep -q 'GLIBC_2\.3[4-9]'; then
    check "the check refuses a library that needs GLIBC_2.34, naming the symbol" \
      bash -c "! $CHK '$T/plain.so' 2.17 2>'$T/plain.err' && grep -q 'pthread_create@GLIBC_2.34' '$T/plain.err'"
  else
    ok "# SKIP this glibc is older than 2.34: plain builds already bind old versions"
  fi
  check "the same library built with common/glibc_floor.h passes" $CHK "$T/pinned.so" 2.17
else
  not_ok "compile the probe libraries: $(head -3 "$T/cc.err")"
fi

# same NAME CMD...: CMD's output and exit status are the same with the
# library preloaded, and the library says nothing.
same() {
  local n=$1; shift
  local a b ra rb
  a=$("$@" 2>&1); ra=$?
  b=$(LD_PRELOAD=$PRELOAD "$@" 2>"$T/$n.err"); rb=$?
  check "non-CUDA process $n: same output and exit status ($ra) with the preload" \
    bash -c "[ '$ra' = '$rb' ] && [ \"\$1\" = \"\$2\" ]" _ "$a" "$b"
  check "non-CUDA process $n: nothing from the library on stderr" \
    bash -c "[ ! -s '$T/$n.err' ] || { [ $SAN = 1 ] && ! grep -q nvshare '$T/$n.err'; }"
}
same true /bin/true
same false /bin/false
same exit7 sh -c 'exit 7'
same ls ls -a /
same python python3 -c 'import ctypes, math; print(math.cos(0), ctypes.CDLL("libc.so.6").abs(-3))'
same fork sh -c 'for i in 1 2 3; do (echo "child $i"); done | sort -r'
same threads sh -c 'python3 -c "import sys, threading; t = [threading.Thread(target=sys.stdout.write, args=(\"%d\n\" % i,)) for i in range(4)]; [x.start() for x in t]; [x.join() for x in t]" | sort'
echo "1..$_tap_n"
