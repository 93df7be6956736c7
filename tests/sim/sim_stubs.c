/*
 * Every symbol the real driver exports (sim_symtab.h), and the table that
 * cuGetProcAddress and dlsym() users resolve against.
 *
 * Functions the simulator implements are strong definitions in the other
 * sim_*.c files; here each exported name also gets a weak fallback that logs
 * the call and returns CUDA_ERROR_NOT_SUPPORTED, so that the library exports
 * exactly the real driver's names (a lookup never fails for a name the real
 * driver has, and `dladdr` on any address we hand out gives an exported name).
 * This file deliberately does not include cuda.h: the stubs have no
 * prototypes of their own, and the table only takes their addresses.
 */
#include <stddef.h>

#include "sim_symtab_entry.h"

void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define CUDA_ERROR_NOT_SUPPORTED 801

#define SIM_SYM(name, base, ver, pt)                                                               \
	__attribute__((weak, noinline)) int name(void)                                             \
	{                                                                                          \
		sim_log("stub %s -> %d", #name, CUDA_ERROR_NOT_SUPPORTED);                         \
		return CUDA_ERROR_NOT_SUPPORTED;                                                   \
	}
#include "sim_symtab.h"
#undef SIM_SYM

const struct sim_sym sim_symtab[] = {
#define SIM_SYM(name, base, ver, pt) {#name, base, ver, pt, (void *)&name},
#include "sim_symtab.h"
#undef SIM_SYM
};
const size_t sim_nsyms = sizeof(sim_symtab) / sizeof(sim_symtab[0]);
