/*
 * The oldest glibc libnvshare.so loads with (docs/interposition.md, "glibc
 * floor"): 2.17 (CentOS 7 / UBI 7, the first AArch64 glibc).
 *
 * The library is preloaded into every process of a workload image, CUDA
 * or not, and a symbol version the image's glibc lacks is fatal at exec
 * ("version `GLIBC_2.34' not found": even /bin/true exits 1). Built
 * against a new glibc, calls bind to the newest version of each name:
 * glibc 2.34 moved libdl and libpthread into libc.so.6 under new version
 * nodes (dlopen@GLIBC_2.34, pthread_create@GLIBC_2.34, ...). The same
 * functions are still exported under their original versions, which
 * older glibcs define too (in libdl.so.2 and libpthread.so.0, which the
 * library therefore names as DT_NEEDED: client/module.mk). The directives
 * below bind each such call to that original version. Force-included
 * (-include) into every object of the library; a name not called in a
 * file costs nothing there.
 *
 * client/check_glibc.sh (run by the build) fails when the library needs a
 * version above the floor: a call that this list misses shows up there.
 * fstat (a new symbol in 2.33; before, an inline calling __fxstat) is not
 * called in the library: common/log.c asks the kernel directly.
 */
#ifndef NVSHARE_COMMON_GLIBC_FLOOR_H
#define NVSHARE_COMMON_GLIBC_FLOOR_H

#if defined(__x86_64__)
#define NVS_GLIBC_BASE "GLIBC_2.2.5"
#define NVS_GLIBC_2_3_3 "GLIBC_2.3.3"
#define NVS_GLIBC_2_12 "GLIBC_2.12"
#elif defined(__aarch64__)
#define NVS_GLIBC_BASE "GLIBC_2.17"
#define NVS_GLIBC_2_3_3 "GLIBC_2.17"
#define NVS_GLIBC_2_12 "GLIBC_2.17"
#endif

#ifdef NVS_GLIBC_BASE
#define NVS_GLIBC_PIN(name, ver) __asm__(".symver " #name "," #name "@" ver)
/* libdl */
NVS_GLIBC_PIN(dlopen, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(dlclose, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(dlerror, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(dladdr, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(dlvsym, NVS_GLIBC_BASE);
/* libpthread */
NVS_GLIBC_PIN(pthread_create, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(pthread_join, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(pthread_detach, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(pthread_once, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(pthread_sigmask, NVS_GLIBC_BASE);
NVS_GLIBC_PIN(pthread_condattr_setclock, NVS_GLIBC_2_3_3);
NVS_GLIBC_PIN(pthread_setname_np, NVS_GLIBC_2_12);
#undef NVS_GLIBC_PIN
#endif

#endif
