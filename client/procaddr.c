/*
 * cuGetProcAddress (v1, _v2, _v2_ptsz) and the runtime's
 * cudaGetDriverEntryPoint[ByVersion][_ptsz]: exact-name substitution.
 *
 * The real function runs with the caller's exact arguments (so cudaVersion
 * and flags pick the ABI variant as the driver would), and its result is
 * replaced by our wrapper for the exact ABI name the driver handed out, found
 * with dladdr(). *symbolStatus is never written by us.
 */
#include "client/internal.h"

#include <dlfcn.h>
#include <string.h>

enum nvs_subst nvs_substitute(void **pfn, const char *asked)
{
	void *p = *pfn;
	Dl_info i;
	if (!p || !dladdr(p, &i) || !i.dli_sname)
		return NVS_SUBST_KEEP;
	enum nvs_lib lib = nvs_lib_of_path(i.dli_fname);
	if (lib != NVS_LIB_CUDA)
		return NVS_SUBST_KEEP; /* ours already, or not the driver's */
	if (i.dli_saddr != p) {
		/* Not the start of an exported symbol: we do not guess. */
		NVS_DEBUG("lookup of %s: driver pointer %p is not an exported symbol (nearest %s)",
			  asked ? asked : "?", p, i.dli_sname);
		return NVS_SUBST_KEEP;
	}
	/* dladdr reports one name per address: a driver that exported a
	 * wrapped function under a second name at the same address would need
	 * that name in entry_points.def too (none does today). */
	const char *name = i.dli_sname;
	const struct nvs_entry *e = nvs_table_find(name);
	if (e && e->family != NVS_FAM_RT && e->family != NVS_FAM_NVML) {
		*pfn = e->wrapper;
		NVS_DEBUG("lookup of %s -> %s: substituted", asked ? asked : "?", name);
		return NVS_SUBST_REPLACED;
	}
	if (!nvs_cfg.disable && nvs_table_is_unknown_variant_of_guarded(name)) {
		static atomic_int logged;
		if (!atomic_exchange(&logged, 1))
			NVS_WARN(
			    "lookup of %s gave %s, a variant libnvshare does not know; refused "
			    "(CUDA_ERROR_NOT_SUPPORTED) so that memory and launches stay accounted",
			    asked ? asked : "?", name);
		return NVS_SUBST_REFUSE;
	}
	return NVS_SUBST_KEEP;
}

static CUresult after_driver_lookup(CUresult r, const char *symbol, void **pfn)
{
	if (r != CUDA_SUCCESS || !symbol || !symbol[0] || !pfn || !*pfn)
		return r;
	if (nvs_substitute(pfn, symbol) == NVS_SUBST_REFUSE) {
		*pfn = NULL;
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return r;
}

CUresult CUDAAPI nvs_wrap_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
					   cuuint64_t flags)
{
	nvs_init();
	if (!nvs_real.abi_cuGetProcAddress)
		return nvs_unresolved("cuGetProcAddress");
	CUresult r = nvs_real.abi_cuGetProcAddress(symbol, pfn, cudaVersion, flags);
	return after_driver_lookup(r, symbol, pfn);
}

CUresult CUDAAPI nvs_wrap_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
					      cuuint64_t flags,
					      CUdriverProcAddressQueryResult *symbolStatus)
{
	nvs_init();
	if (!nvs_real.cuGetProcAddress_v2)
		return nvs_unresolved("cuGetProcAddress_v2");
	CUresult r = nvs_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
	return after_driver_lookup(r, symbol, pfn);
}

/* The CUDA 13 driver exports no cuGetProcAddress_v2_ptsz (cuda.h makes it a
 * static inline over _v2). If a driver exports one we call it; otherwise we
 * apply the header's documented rule: no stream flag -> per-thread. */
CUresult CUDAAPI nvs_wrap_cuGetProcAddress_v2_ptsz(const char *symbol, void **pfn, int cudaVersion,
						   cuuint64_t flags,
						   CUdriverProcAddressQueryResult *symbolStatus)
{
	nvs_init();
	CUresult r;
	if (nvs_real.cuGetProcAddress_v2_ptsz) {
		r = nvs_real.cuGetProcAddress_v2_ptsz(symbol, pfn, cudaVersion, flags,
						      symbolStatus);
	} else {
		if (!nvs_real.cuGetProcAddress_v2)
			return nvs_unresolved("cuGetProcAddress_v2_ptsz");
		if (!(flags & (CU_GET_PROC_ADDRESS_LEGACY_STREAM |
			       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
			flags |= CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
		r = nvs_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
	}
	return after_driver_lookup(r, symbol, pfn);
}

/* ---- runtime ---- */

/* Real runtime function: the one the dlsym path saw, else the next
 * definition after us, else libcudart.so.13 if loaded privately. */
static void *rt_real(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	f = nvs_dlsym_real(RTLD_NEXT, name);
	if (!f) {
		void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
		if (h) {
			f = nvs_dlsym_real(h, name);
			dlclose(h);
		}
	}
	if (f)
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	return f;
}

static cudaError_t after_rt_lookup(cudaError_t r, const char *symbol, void **funcPtr)
{
	if (r != cudaSuccess || !symbol || !symbol[0] || !funcPtr || !*funcPtr)
		return r;
	if (nvs_substitute(funcPtr, symbol) == NVS_SUBST_REFUSE) {
		*funcPtr = NULL;
		return cudaErrorNotSupported;
	}
	return r;
}

#define NVS_RT_EP(name)                                                                            \
	cudaError_t nvs_wrap_##name(const char *symbol, void **funcPtr, unsigned long long flags,  \
				    enum cudaDriverEntryPointQueryResult *driverStatus)            \
	{                                                                                          \
		nvs_init();                                                                        \
		nvs_PFNrt_cudaGetDriverEntryPoint f =                                              \
		    (nvs_PFNrt_cudaGetDriverEntryPoint)rt_real((void **)&nvs_real.name, #name);    \
		if (!f)                                                                            \
			return cudaErrorNotSupported;                                              \
		return after_rt_lookup(f(symbol, funcPtr, flags, driverStatus), symbol, funcPtr);  \
	}
#define NVS_RT_EPV(name)                                                                           \
	cudaError_t nvs_wrap_##name(const char *symbol, void **funcPtr, unsigned int cudaVersion,  \
				    unsigned long long flags,                                      \
				    enum cudaDriverEntryPointQueryResult *driverStatus)            \
	{                                                                                          \
		nvs_init();                                                                        \
		nvs_PFNrt_cudaGetDriverEntryPointByVersion f =                                     \
		    (nvs_PFNrt_cudaGetDriverEntryPointByVersion)rt_real((void **)&nvs_real.name,   \
									#name);                    \
		if (!f)                                                                            \
			return cudaErrorNotSupported;                                              \
		return after_rt_lookup(f(symbol, funcPtr, cudaVersion, flags, driverStatus),       \
				       symbol, funcPtr);                                           \
	}

NVS_RT_EP(cudaGetDriverEntryPoint)
NVS_RT_EP(cudaGetDriverEntryPoint_ptsz)
NVS_RT_EPV(cudaGetDriverEntryPointByVersion)
NVS_RT_EPV(cudaGetDriverEntryPointByVersion_ptsz)
