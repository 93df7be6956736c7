/*
 * Prototypes of every wrapper, generated from client/entry_points.def: the
 * wrapper for ABI name X is the C function nvs_wrap_X, whose ELF symbol is X
 * itself (asm label) with default visibility, so that programs linked with
 * -lcuda bind to it and dladdr() of a substituted pointer names X. Its type
 * is the table's PFN typedef's function type; a definition with another
 * signature does not compile, and a static assertion per entry
 * (client/table.c) says so explicitly.
 */
#ifndef NVSHARE_CLIENT_WRAPPERS_H
#define NVSHARE_CLIENT_WRAPPERS_H

#include "client/real.h"

#define NVS_EXPORT __attribute__((visibility("default")))

#define NVS_WRAP(n, t, f) extern __typeof__(*(t)0) nvs_wrap_##n __asm__(#n) NVS_EXPORT;
#define NVS_WRAP_R(n, t, f) extern __typeof__(*(t)0) nvs_wrap_##n __asm__(#n) NVS_EXPORT;
#include "client/entry_points.def"
#undef NVS_WRAP
#undef NVS_WRAP_R

#endif
