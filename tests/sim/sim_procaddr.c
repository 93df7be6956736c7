/*
 * cuGetProcAddress (4 arguments, CUDA 11.3) and cuGetProcAddress_v2
 * (5 arguments, CUDA 12.0) with the driver's semantics
 * (shared/notes/interposition.md §2):
 *  - `symbol` is a base name; the newest ABI introduced at or before
 *    `cudaVersion` is returned (cuMemAlloc@3020 -> cuMemAlloc_v2);
 *  - flag 2 (per-thread default stream) picks the _ptsz/_ptds twin of that
 *    ABI when it exists (and existed at cudaVersion), flags 0/1 the legacy;
 *  - unknown name: CUDA_SUCCESS, *pfn NULL, status SYMBOL_NOT_FOUND; known
 *    name but nothing old enough: status VERSION_NOT_SUFFICIENT; cudaVersion
 *    newer than the driver: CUDA_ERROR_INVALID_VALUE. The status is written
 *    only through a non-NULL pointer.
 * The addresses handed out are those of the exported symbols themselves, so
 * dladdr() names the exact ABI (the client library relies on it).
 */
#include <string.h>

#include "sim_internal.h"
#include "sim_symtab_entry.h"

static const char *status_name(CUdriverProcAddressQueryResult st)
{
	switch (st) {
	case CU_GET_PROC_ADDRESS_SUCCESS:
		return "found";
	case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND:
		return "not_found";
	case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
		return "version_not_sufficient";
	default:
		return "?";
	}
}

static const struct sim_sym *resolve(const char *symbol, int version, cuuint64_t flags,
				     CUdriverProcAddressQueryResult *st)
{
	const struct sim_sym *best = NULL;
	int known = 0;
	for (size_t i = 0; i < sim_nsyms; i++) {
		const struct sim_sym *s = &sim_symtab[i];
		if (s->per_thread || strcmp(s->base, symbol) != 0)
			continue;
		known = 1;
		if (s->version <= version && (!best || s->version > best->version))
			best = s;
	}
	if (!best) {
		*st = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			    : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return NULL;
	}
	*st = CU_GET_PROC_ADDRESS_SUCCESS;
	if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
		size_t n = strlen(best->name);
		for (size_t i = 0; i < sim_nsyms; i++) {
			const struct sim_sym *s = &sim_symtab[i];
			if (s->per_thread && s->version <= version &&
			    strncmp(s->name, best->name, n) == 0 &&
			    (strcmp(s->name + n, "_ptsz") == 0 ||
			     strcmp(s->name + n, "_ptds") == 0))
				return s;
		}
	}
	return best;
}

static CUresult getproc(int api, const char *symbol, void **pfn, int version, cuuint64_t flags,
			CUdriverProcAddressQueryResult *status)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	const struct sim_sym *s = NULL;
	CUresult rc = CUDA_SUCCESS;

	sim_state_init();
	if (!pfn || !symbol) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else {
		*pfn = NULL;
		if (version > SIM_DRIVER_VERSION || (flags & ~(cuuint64_t)3))
			rc = CUDA_ERROR_INVALID_VALUE;
		else if (symbol[0])
			s = resolve(symbol, version, flags, &st);
		if (rc == CUDA_SUCCESS) {
			if (s)
				*pfn = s->addr;
			if (status)
				*status = st;
		}
	}
	sim_log("getproc %s %s %d %llu -> rc=%d status=%s%s %s", api == 2 ? "v2" : "v1",
		symbol ? (symbol[0] ? symbol : "\"\"") : "(null)", version,
		(unsigned long long)flags, (int)rc, rc == CUDA_SUCCESS ? status_name(st) : "-",
		status ? "" : "(nullptr)", s ? s->name : "-");
	return rc;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return getproc(1, symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus)
{
	return getproc(2, symbol, pfn, cudaVersion, flags, symbolStatus);
}
