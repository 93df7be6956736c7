/*
 * Decision half of the exported dlsym (client/dlsym_entry.S).
 *
 * Pass-through (the overwhelmingly common case: any name not in our table,
 * any RTLD_NEXT lookup) touches no state, takes no lock, allocates nothing
 * and logs nothing. For an exact table name looked up in a handle or
 * RTLD_DEFAULT, we ask glibc ourselves (handle-scoped lookups do not depend
 * on the caller) and substitute our wrapper only if the real result is that
 * very symbol inside libcuda, libnvidia-ml or libcudart.
 */
#include "client/internal.h"

#include <dlfcn.h>
#include <string.h>

typedef void *(*dlsym_fn)(void *, const char *);

/* Read by the assembly entry (hidden: -fvisibility=hidden). */
dlsym_fn nvs_dlsym_glibc;

void *nvs_dlsym_policy(void *handle, const char *name, void *caller);

NVS_NO_SANITIZE static dlsym_fn glibc_dlsym(void)
{
	dlsym_fn f = __atomic_load_n(&nvs_dlsym_glibc, __ATOMIC_ACQUIRE);
	if (__builtin_expect(f != NULL, 1))
		return f;
	/* dlvsym, never the public dlsym (that is us). */
	f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
#if defined(__x86_64__)
	if (!f)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#elif defined(__aarch64__)
	if (!f)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#endif
	__atomic_store_n(&nvs_dlsym_glibc, f, __ATOMIC_RELEASE);
	return f;
}

void *nvs_dlsym_real(void *handle, const char *name)
{
	dlsym_fn f = glibc_dlsym();
	return f ? f(handle, name) : NULL;
}

NVS_NO_SANITIZE enum nvs_lib nvs_lib_of_path(const char *path)
{
	if (!path)
		return NVS_LIB_OTHER;
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	if (!strncmp(b, "libcuda.so", 10))
		return NVS_LIB_CUDA;
	if (!strncmp(b, "libnvidia-ml.so", 15))
		return NVS_LIB_NVML;
	if (!strncmp(b, "libcudart.so", 12))
		return NVS_LIB_CUDART;
	if (!strncmp(b, "libnvshare", 10))
		return NVS_LIB_SELF;
	return NVS_LIB_OTHER;
}

NVS_NO_SANITIZE static enum nvs_lib expected_lib(unsigned char fam)
{
	switch (fam) {
	case NVS_FAM_RT:
		return NVS_LIB_CUDART;
	case NVS_FAM_NVML:
		return NVS_LIB_NVML;
	default:
		return NVS_LIB_CUDA;
	}
}

NVS_NO_SANITIZE void *nvs_dlsym_policy(void *handle, const char *name, void *caller)
{
	if (__builtin_expect(!nvs_dlsym_glibc, 0) && !glibc_dlsym())
		return NULL;
	if (handle == RTLD_NEXT || !name)
		return NULL;
	const struct nvs_entry *e = nvs_table_find(name);
	if (!e)
		return NULL;
	/* The driver's own lookups (e.g. libcuda dlsym'ing itself) are never
	 * redirected into us. */
	Dl_info ci;
	if (caller && dladdr(caller, &ci)) {
		enum nvs_lib cl = nvs_lib_of_path(ci.dli_fname);
		if (cl == NVS_LIB_CUDA || cl == NVS_LIB_NVML)
			return NULL;
	}
	void *real = nvs_dlsym_glibc(handle, name);
	if (!real)
		return NULL; /* the tail-jump repeats it and sets dlerror */
	Dl_info ri;
	if (!dladdr(real, &ri) || ri.dli_saddr != real)
		return NULL;
	enum nvs_lib rl = nvs_lib_of_path(ri.dli_fname);
	if (rl != expected_lib(e->family))
		return NULL;
	/* Runtime and NVML reals are not resolved by the driver init: keep the
	 * one we saw (first wins; the same library answers every time). */
	if (e->family == NVS_FAM_RT || e->family == NVS_FAM_NVML) {
		void *expect = NULL;
		__atomic_compare_exchange_n(e->real, &expect, real, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED);
	}
	return e->wrapper;
}
