/*
 * The real CUDA runtime (libcudart.so.13, linked by path) on the fake
 * driver: device count, set device, malloc, memcpy both ways with a data
 * check, mem info, free, device sync. Prints TAP; run by t_cudart.sh with
 * the fake libcuda.so.1 first on LD_LIBRARY_PATH.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

static int n;
static int fails;

static void check(int ok, const char *what, cudaError_t e)
{
	n++;
	if (ok) {
		printf("ok %d - %s\n", n, what);
	} else {
		fails++;
		printf("not ok %d - %s (%d %s)\n", n, what, (int)e, cudaGetErrorName(e));
	}
}

int main(void)
{
	int count = -1;
	cudaError_t e = cudaGetDeviceCount(&count);
	check(e == cudaSuccess && count >= 1, "cudaGetDeviceCount", e);
	printf("# device count %d\n", count);
	e = cudaSetDevice(0);
	check(e == cudaSuccess, "cudaSetDevice(0)", e);

	size_t fr0 = 0, tot = 0;
	e = cudaMemGetInfo(&fr0, &tot);
	check(e == cudaSuccess && tot > 0 && fr0 <= tot, "cudaMemGetInfo", e);
	printf("# free %zu total %zu\n", fr0, tot);

	const size_t sz = 64u << 20;
	void *d = NULL;
	e = cudaMalloc(&d, sz);
	check(e == cudaSuccess && d, "cudaMalloc 64 MiB", e);

	size_t fr1 = 0;
	e = cudaMemGetInfo(&fr1, &tot);
	check(e == cudaSuccess && fr1 + sz <= fr0, "cudaMemGetInfo sees the allocation", e);

	unsigned char *h = malloc(sz), *back = malloc(sz);
	for (size_t i = 0; i < sz; i++)
		h[i] = (unsigned char)(i * 7 + 3);
	memset(back, 0, sz);
	e = cudaMemcpy(d, h, sz, cudaMemcpyHostToDevice);
	check(e == cudaSuccess, "cudaMemcpy H2D", e);
	e = cudaMemcpy(back, d, sz, cudaMemcpyDeviceToHost);
	check(e == cudaSuccess && memcmp(h, back, sz) == 0, "cudaMemcpy D2H returns the data", e);

	e = cudaMemset(d, 0x5a, 4096);
	cudaError_t e2 = cudaMemcpy(back, d, 4096, cudaMemcpyDeviceToHost);
	check(e == cudaSuccess && e2 == cudaSuccess && back[0] == 0x5a && back[4095] == 0x5a,
	      "cudaMemset", e ? e : e2);

	void *m = NULL;
	e = cudaMallocManaged(&m, 4u << 20, cudaMemAttachGlobal);
	check(e == cudaSuccess && m, "cudaMallocManaged", e);
	if (m) {
		memset(m, 1, 4u << 20);
		e = cudaFree(m);
		check(e == cudaSuccess, "cudaFree managed", e);
	}

	e = cudaDeviceSynchronize();
	check(e == cudaSuccess, "cudaDeviceSynchronize", e);
	e = cudaFree(d);
	check(e == cudaSuccess, "cudaFree", e);
	size_t fr2 = 0;
	e = cudaMemGetInfo(&fr2, &tot);
	check(e == cudaSuccess && fr2 == fr0, "memory returned after cudaFree", e);
	free(h);
	free(back);
	return fails ? 1 : 0;
}
