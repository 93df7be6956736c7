/*
 * The real libcudart.so.13 bootstrapping through our dlsym and
 * cuGetProcAddress_v2 substitution, on the simulated GPU (run by
 * t_cudart.sh under LD_PRELOAD). Linked with libcudart by path.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int n, bad;
static void ok(int c, const char *what)
{
	printf("%sok %d - %s\n", c ? "" : "not ", ++n, what);
	bad += !c;
}

static int ours(void *p, const char *name)
{
	Dl_info i;
	return p && dladdr(p, &i) && strstr(i.dli_fname, "libnvshare") && i.dli_sname &&
	       !strcmp(i.dli_sname, name);
}

int main(void)
{
	int count = 0;
	ok(cudaGetDeviceCount(&count) == cudaSuccess && count >= 1, "cudaGetDeviceCount");
	void *d = NULL;
	ok(cudaMalloc(&d, 32 << 20) == cudaSuccess && d, "cudaMalloc 32 MiB");
	struct cudaPointerAttributes a;
	memset(&a, 0, sizeof a);
	ok(cudaPointerGetAttributes(&a, d) == cudaSuccess && a.type == cudaMemoryTypeManaged,
	   "cudaMalloc became managed memory");
	unsigned int m = 0;
	ok(cuPointerGetAttribute(&m, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)d) ==
		   CUDA_SUCCESS &&
	       m,
	   "driver agrees: IS_MANAGED");
	ok(cudaFree(d) == cudaSuccess, "cudaFree");

	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult st;
	ok(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &st) ==
		   cudaSuccess &&
	       ours(fn, "cuMemAlloc_v2"),
	   "cudaGetDriverEntryPointByVersion(cuMemAlloc) -> our cuMemAlloc_v2");
	fn = NULL;
	ok(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000,
					    cudaEnablePerThreadDefaultStream, &st) == cudaSuccess &&
	       ours(fn, "cuLaunchKernel_ptsz"),
	   "cudaGetDriverEntryPointByVersion(cuLaunchKernel, per-thread) -> _ptsz wrapper");
	fn = NULL;
	ok(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault,
					    &st) == cudaSuccess &&
	       fn && !ours(fn, "cuCtxGetCurrent"),
	   "cudaGetDriverEntryPointByVersion(cuCtxGetCurrent) passes through");
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	void *w = h ? dlsym(h, "cudaGetDriverEntryPoint") : NULL;
	ok(ours(w, "cudaGetDriverEntryPoint"), "dlsym(libcudart, cudaGetDriverEntryPoint) -> ours");
	if (w) {
		cudaError_t (*gdep)(const char *, void **, unsigned long long,
				    enum cudaDriverEntryPointQueryResult *) = w;
		fn = NULL;
		ok(gdep("cuMemFree", &fn, cudaEnableDefault, &st) == cudaSuccess &&
		       ours(fn, "cuMemFree_v2"),
		   "cudaGetDriverEntryPoint(cuMemFree) -> our cuMemFree_v2");
	}
	printf("1..%d\n", n);
	return bad != 0;
}
