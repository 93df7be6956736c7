/* One exported driver symbol (see gen_symtab.py, sim_stubs.c). */
#ifndef NVSHARE_TESTS_SIM_SYMTAB_ENTRY_H
#define NVSHARE_TESTS_SIM_SYMTAB_ENTRY_H
#include <stddef.h>

struct sim_sym {
	const char *name; /* exported ELF name, e.g. "cuMemAlloc_v2" */
	const char *base; /* what cuGetProcAddress callers ask for: "cuMemAlloc" */
	int version;	  /* CUDA version that introduced this ABI */
	int per_thread;	  /* _ptsz / _ptds variant */
	void *addr;
};
extern const struct sim_sym sim_symtab[];
extern const size_t sim_nsyms;
#endif
