/*
 * How the test applications (tests/e2e/sim_app, tests/quota/quota_app) find
 * the driver: the way libcudart 13 does, so that libnvshare is exercised on
 * the path PyTorch takes. dlopen("libcuda.so.1"), one dlsym of
 * cuGetProcAddress_v2, then every lookup through the pointer obtained for
 * ("cuGetProcAddress", 12000). Header-only: each app is one program.
 */
#ifndef NVSHARE_TESTS_DRIVER_LOOKUP_H
#define NVSHARE_TESTS_DRIVER_LOOKUP_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef CUresult (*nvs_test_gpa_t)(const char *, void **, int, cuuint64_t,
				   CUdriverProcAddressQueryResult *);

/* The app's name in error messages. */
static const char *nvs_test_prog = "app";

/* `s` at cudaVersion `ver` through `gpa`; exits 2 if the driver lacks it. */
static inline void *nvs_test_sym(nvs_test_gpa_t gpa, const char *s, int ver)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st;
	if (gpa(s, &p, ver, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || !p) {
		fprintf(stderr, "%s: driver lacks %s\n", nvs_test_prog, s);
		exit(2);
	}
	return p;
}

/* Opens the driver; returns the lookup function every further symbol
 * comes from, and the handle (for test-only exports such as the
 * simulator's statistics) in *handle. Exits 2 on failure. */
static inline nvs_test_gpa_t nvs_test_load_driver(void **handle)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "%s: %s\n", nvs_test_prog, dlerror());
		exit(2);
	}
	nvs_test_gpa_t first = (nvs_test_gpa_t)dlsym(h, "cuGetProcAddress_v2");
	if (!first) {
		fprintf(stderr, "%s: no cuGetProcAddress_v2 in libcuda.so.1\n", nvs_test_prog);
		exit(2);
	}
	if (handle)
		*handle = h;
	/* As libcudart: all further lookups through cuGetProcAddress@12000. */
	return (nvs_test_gpa_t)nvs_test_sym(first, "cuGetProcAddress", 12000);
}

#endif
