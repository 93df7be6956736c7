/*
 * Real (next) entry points, one typed member per client/entry_points.def
 * line. Filled once by the library's lazy init (client/entry.c); read-only
 * afterwards, so any thread may call through them without locking. A member
 * is NULL when the loaded driver does not export that name: callers check
 * and return CUDA_ERROR_NOT_SUPPORTED rather than call NULL.
 *
 * Member names are the exact ABI names (nvs_real.cuCtxSynchronize,
 * nvs_real.cuEventDestroy_v2, nvs_real.cuMemAlloc_v2), except for ABI names
 * that cuda.h #defines to newer ones (cuGetProcAddress, cuMemAlloc v1...):
 * those are nvs_real.abi_<name>.
 */
#ifndef NVSHARE_CLIENT_REAL_H
#define NVSHARE_CLIENT_REAL_H

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM) || defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "libnvshare is built with legacy-stream cuda.h names; per-thread variants are explicit"
#endif

#include <cuda.h>
#include <cudaTypedefs.h>
#include <driver_types.h>

#include "client/cuda_compat.h"
#include "nvml_api.h"

/* Runtime entry points (libcudart); cuda_runtime_api.h is not included so
 * its declarations cannot collide with our exports of the same names. */
typedef cudaError_t (*nvs_PFNrt_cudaGetDriverEntryPoint)(
    const char *symbol, void **funcPtr, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus);
typedef cudaError_t (*nvs_PFNrt_cudaGetDriverEntryPointByVersion)(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus);

struct nvs_real_table {
#define NVS_WRAP(n, t, f) t n;
#define NVS_WRAP_R(n, t, f) t abi_##n;
#define NVS_USE(n, t) t n;
#define NVS_USE_NVML(n, t) t n;
#include "client/entry_points.def"
#undef NVS_WRAP
#undef NVS_WRAP_R
#undef NVS_USE
#undef NVS_USE_NVML
};

extern struct nvs_real_table nvs_real;

#endif
