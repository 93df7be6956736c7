/*
 * launch_overhead: nanoseconds per cuLaunchKernel call against the stub
 * driver (bench/micro/stub_cuda.c). It finds cuLaunchKernel as an
 * application does (dlopen libcuda.so.1, dlsym); run it once plainly (the
 * stub's own cost) and once with LD_PRELOAD=libnvshare.so (the wrapper's):
 * the difference is what libnvshare adds per launch. bench/micro/run does
 * both, uncapped and capped (NVSHARE_GPU_CORE_LIMIT).
 *
 *   launch_overhead [--calls N] [--rounds R]
 *
 * Prints "ns_per_call=X" (the best round: the least disturbed by other
 * processes on a busy machine) and "result=OK" when every call succeeded.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long calls = 2000000, rounds = 7;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--calls"))
			calls = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atol(argv[i + 1]);
	}
	if (calls < 1 || rounds < 1)
		return 2;
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "launch_overhead: %s\n", dlerror());
		return 1;
	}
	CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
	CUresult (*retain)(CUcontext *, CUdevice) =
	    (CUresult(*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
	launch_fn launch = (launch_fn)dlsym(h, "cuLaunchKernel");
	CUcontext ctx;
	/* As an application: a context first (libnvshare attaches the GPU,
	 * and a compute limit then caps its launches), then launches. */
	if (!init || !retain || !launch || init(0) != CUDA_SUCCESS ||
	    retain(&ctx, 0) != CUDA_SUCCESS) {
		fprintf(stderr,
			"launch_overhead: no cuInit/cuDevicePrimaryCtxRetain/cuLaunchKernel\n");
		return 1;
	}
	int bad = 0;
	/* Warm-up: the first gated call attaches the device. */
	for (long i = 0; i < 1000; i++)
		bad |= launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS;
	double best = 1e30;
	for (long r = 0; r < rounds; r++) {
		double t0 = now_ns();
		for (long i = 0; i < calls; i++)
			bad |= launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS;
		double ns = (now_ns() - t0) / (double)calls;
		if (ns < best)
			best = ns;
	}
	printf("ns_per_call=%.2f\nresult=%s\n", best, bad ? "FAILED" : "OK");
	return bad;
}
