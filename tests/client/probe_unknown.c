/* Unknown driver variants (run by t_lookup.sh against fakedrv/libcuda.so.1). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	int n = 0, bad = 0;
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	PFN_cuGetProcAddress_v12000 gpa =
	    h ? (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2") : NULL;
	if (!gpa) {
		printf("not ok 1 - fake driver loaded\n1..1\n");
		return 1;
	}
	const struct {
		const char *sym;
		int refused;
	} cases[] = {
	    {"cuMemAlloc", 1}, {"cuLaunchKernel", 1}, {"cuGraphAddNode", 1}, {"cuModuleLoad", 0}};
	for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		void *p = (void *)&n;
		CUresult r = gpa(cases[i].sym, &p, 13000, 0, NULL);
		int ok = cases[i].refused ? (r == CUDA_ERROR_NOT_SUPPORTED && p == NULL)
					  : (r == CUDA_SUCCESS && p != NULL);
		bad += !ok;
		printf("%sok %d - unknown variant of %s %s\n", ok ? "" : "not ", ++n, cases[i].sym,
		       cases[i].refused ? "refused (gated/accounted)" : "passed through");
	}
	printf("1..%d\n", n);
	return bad != 0;
}
