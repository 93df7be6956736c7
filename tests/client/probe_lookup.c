/*
 * Lookup paths under LD_PRELOAD=libnvshare.so (run by t_lookup.sh): dlsym
 * on the driver handle, RTLD_DEFAULT, cuGetProcAddress (v1) and
 * cuGetProcAddress_v2 (flags 0 and 2, NULL and non-NULL status), probes,
 * too-new versions, pass-through of names we do not wrap, foreign cu-prefixed
 * names. Links only libdl: it finds the driver the way libcudart does.
 * Prints TAP.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_test, n_fail;
static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void ok(int cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%sok %d - ", cond ? "" : "not ", ++n_test);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	if (!cond)
		n_fail++;
}

struct ent {
	const char *name, *fam;
};
/* Names only (# never expands a macro): the exact ABI names. */
static const struct ent table[] = {
#define NVS_WRAP(n, t, f) {#n, #f},
#define NVS_WRAP_R(n, t, f) {#n, #f},
#include "client/entry_points.def"
};
#define NT (sizeof table / sizeof table[0])

static int is_driver(const struct ent *e)
{
	return strcmp(e->fam, "RT") && strcmp(e->fam, "NVML");
}
/* Documented: not exported by the CUDA 13 driver. */
static int driver_lacks(const char *n)
{
	return !strcmp(n, "cuGetProcAddress_v2_ptsz");
}
static int in_table(const char *n)
{
	for (size_t i = 0; i < NT; i++)
		if (!strcmp(table[i].name, n))
			return 1;
	return 0;
}

static const char *base(const char *p)
{
	const char *b = strrchr(p, '/');
	return b ? b + 1 : p;
}

/* 1 if p is our export named exactly `name`. */
static int ours(void *p, const char *name)
{
	Dl_info i;
	return p && dladdr(p, &i) && i.dli_saddr == p &&
	       !strncmp(base(i.dli_fname), "libnvshare", 10) && i.dli_sname &&
	       !strcmp(i.dli_sname, name);
}
static const char *lib_of(void *p)
{
	Dl_info i;
	return p && dladdr(p, &i) ? base(i.dli_fname) : "(none)";
}
static const char *name_of(void *p)
{
	Dl_info i;
	return p && dladdr(p, &i) && i.dli_sname ? i.dli_sname : "(none)";
}

/* Every cudaVersion at which a wrapped name gets another ABI (12020: the
 * first cuGraphAddNode, renamed _v2 at 12030). */
static const int versions[] = {2000,  3000,  3020,  4000,  5000,  6000,	 7000,
			       9000,  10000, 10010, 10020, 11020, 11030, 11040,
			       11060, 12000, 12020, 12030, 12050, 12080, 13000};
#define NV (sizeof versions / sizeof versions[0])

/* Strips _ptsz/_ptds and _vN. */
static void base_name(const char *n, char *out, size_t cap)
{
	snprintf(out, cap, "%s", n);
	size_t l = strlen(out);
	if (l > 5 && (!strcmp(out + l - 5, "_ptsz") || !strcmp(out + l - 5, "_ptds")))
		out[l -= 5] = 0;
	if (l > 3 && out[l - 3] == '_' && out[l - 2] == 'v' && out[l - 1] >= '0' &&
	    out[l - 1] <= '9')
		out[l - 3] = 0;
}

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	ok(h != NULL, "dlopen libcuda.so.1 (the simulated GPU)");
	if (!h) {
		printf("1..%d\n", n_test);
		return 1;
	}

	/* ---- dlsym(handle) and dlsym(RTLD_DEFAULT) ---- */
	int bad_h = 0, bad_d = 0;
	for (size_t i = 0; i < NT; i++) {
		if (!is_driver(&table[i]))
			continue;
		void *p = dlsym(h, table[i].name);
		if (driver_lacks(table[i].name) ? p != NULL : !ours(p, table[i].name)) {
			printf("# dlsym(libcuda, %s) -> %s in %s\n", table[i].name, name_of(p),
			       lib_of(p));
			bad_h++;
		}
		void *q = dlsym(RTLD_DEFAULT, table[i].name);
		if (!ours(q, table[i].name)) {
			printf("# dlsym(RTLD_DEFAULT, %s) -> %s in %s\n", table[i].name, name_of(q),
			       lib_of(q));
			bad_d++;
		}
	}
	ok(!bad_h, "dlsym(libcuda handle, name) substitutes every wrapped driver name (%d wrong)",
	   bad_h);
	ok(!bad_d, "dlsym(RTLD_DEFAULT, name) finds our export for every wrapped name (%d wrong)",
	   bad_d);

	PFN_cuGetProcAddress_v12000 gpa2 =
	    (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
	PFN_cuGetProcAddress_v11030 gpa1 =
	    (PFN_cuGetProcAddress_v11030)dlsym(h, "cuGetProcAddress");
	ok(ours((void *)gpa2, "cuGetProcAddress_v2"),
	   "dlsym(h, cuGetProcAddress_v2) is our wrapper");
	ok(ours((void *)gpa1, "cuGetProcAddress"), "dlsym(h, cuGetProcAddress) is our v1 wrapper");
	if (!gpa1 || !gpa2) {
		printf("1..%d\n", n_test);
		return 1;
	}

	/* libcudart's bootstrap: probe, cuInit@2000, self-lookups. */
	void *p = (void *)1;
	CUresult r = gpa2("", &p, 0, 0, NULL);
	ok(1, "empty-symbol probe at version 0 returns (%d)", (int)r);
	ok(!ours(p, ""), "empty-symbol probe: nothing substituted");
	p = NULL;
	r = gpa2("cuInit", &p, 2000, 0, NULL);
	ok(r == CUDA_SUCCESS && ours(p, "cuInit"), "cuInit@2000 -> our cuInit");
	p = NULL;
	r = gpa2("cuGetProcAddress", &p, 11030, 0, NULL);
	ok(r == CUDA_SUCCESS && ours(p, "cuGetProcAddress"),
	   "cuGetProcAddress@11030 -> v1 wrapper");
	p = NULL;
	r = gpa2("cuGetProcAddress", &p, 12000, 0, NULL);
	ok(r == CUDA_SUCCESS && ours(p, "cuGetProcAddress_v2"),
	   "cuGetProcAddress@12000 -> _v2 wrapper");

	/* ---- every wrapped driver name through cuGetProcAddress v1 and _v2,
	 * flags 0 and 2, over all versions; nothing wrapped leaks ---- */
	int leaked = 0, missing = 0;
	for (size_t i = 0; i < NT; i++) {
		if (!is_driver(&table[i]) || driver_lacks(table[i].name))
			continue;
		char b[128];
		base_name(table[i].name, b, sizeof b);
		int found1 = 0, found2 = 0;
		for (size_t v = 0; v < NV; v++) {
			for (int fl = 0; fl <= 2; fl += 2) {
				CUdriverProcAddressQueryResult st = 99;
				void *q = NULL;
				CUresult rr =
				    gpa2(b, &q, versions[v], (cuuint64_t)fl, (v & 1) ? &st : NULL);
				if (rr == CUDA_SUCCESS && q) {
					if (ours(q, table[i].name))
						found2 = 1;
					if (!strncmp(lib_of(q), "libcuda", 7) &&
					    in_table(name_of(q))) {
						printf("# leaked: %s@%d flags %d -> %s\n", b,
						       versions[v], fl, name_of(q));
						leaked++;
					}
					if ((v & 1) && st != CU_GET_PROC_ADDRESS_SUCCESS) {
						printf(
						    "# status not written by the driver for %s\n",
						    b);
						leaked++;
					}
				}
				q = NULL;
				rr = gpa1(b, &q, versions[v], (cuuint64_t)fl);
				if (rr == CUDA_SUCCESS && ours(q, table[i].name))
					found1 = 1;
			}
		}
		if (!found1 || !found2) {
			printf("# %s not obtained through cuGetProcAddress%s%s\n", table[i].name,
			       found1 ? "" : " v1", found2 ? "" : " _v2");
			missing++;
		}
	}
	ok(!missing,
	   "every wrapped driver name is substituted via cuGetProcAddress and _v2 (%d missing)",
	   missing);
	ok(!leaked, "no wrapped driver name ever handed out unsubstituted (%d)", leaked);

	/* per-thread flags pick the _ptsz wrapper */
	p = NULL;
	gpa2("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
	ok(ours(p, "cuLaunchKernel_ptsz"),
	   "cuLaunchKernel flags 2 -> cuLaunchKernel_ptsz wrapper (%s)", name_of(p));
	p = NULL;
	gpa2("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
	ok(ours(p, "cuLaunchKernel"), "cuLaunchKernel flags 1 -> legacy wrapper");
	p = NULL;
	gpa2("cuMemcpyHtoD", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
	ok(ours(p, "cuMemcpyHtoD_v2_ptds"), "cuMemcpyHtoD flags 2 -> _v2_ptds wrapper (%s)",
	   name_of(p));
	p = NULL;
	gpa2("cuMemAlloc", &p, 3020, 0, NULL);
	ok(ours(p, "cuMemAlloc_v2"), "cuMemAlloc@3020 -> cuMemAlloc_v2 wrapper");
	p = NULL;
	gpa2("cuCtxCreate", &p, 11040, 0, NULL);
	ok(ours(p, "cuCtxCreate_v3"), "cuCtxCreate@11040 -> _v3 wrapper (%s)", name_of(p));
	p = NULL;
	gpa2("cuGraphAddNode", &p, 12020, 0, NULL);
	ok(ours(p, "cuGraphAddNode"), "cuGraphAddNode@12020 -> 5-argument wrapper (%s)",
	   name_of(p));
	p = NULL;
	gpa2("cuGraphAddNode", &p, 13000, 0, NULL);
	ok(ours(p, "cuGraphAddNode_v2"), "cuGraphAddNode@13000 -> _v2 wrapper (%s)", name_of(p));
	p = NULL;
	gpa1("cuGraphAddMemAllocNode", &p, 11040, 0);
	ok(ours(p, "cuGraphAddMemAllocNode"),
	   "cuGraphAddMemAllocNode@11040 (v1 lookup) -> wrapper (%s)", name_of(p));

	/* status pointer NULL and non-NULL, too-new version */
	CUdriverProcAddressQueryResult st = 77;
	p = (void *)&st;
	r = gpa2("cuMemAlloc", &p, 99000, 0, &st);
	ok(r == CUDA_ERROR_INVALID_VALUE, "too-new version passed through: driver's error (%d)",
	   (int)r);
	st = 77;
	p = NULL;
	r = gpa2("cuNoSuchFunction", &p, 13000, 0, &st);
	ok(r == CUDA_SUCCESS && !p && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
	   "unknown name: driver's answer untouched (status %d)", (int)st);

	/* names we do not wrap pass through: same pointer as the driver's */
	const char *plain[] = {"cuCtxGetCurrent", "cuModuleGetFunction", "cuDeviceGetAttribute",
			       "cuGetExportTable", "cuMemAdvise"};
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		void *q = NULL;
		gpa2(plain[i], &q, 13000, 0, NULL);
		Dl_info di;
		int pass = q && dladdr(q, &di) && !strncmp(base(di.dli_fname), "libcuda", 7) &&
			   dlsym(h, di.dli_sname) == q;
		ok(pass, "%s passes through untouched (%s in %s)", plain[i], name_of(q), lib_of(q));
	}

	/* foreign cu-prefixed names are never touched */
	void *dnn = dlopen(getenv("NVS_FOREIGN_LIB"), RTLD_NOW | RTLD_LOCAL);
	if (dnn) {
		void *a = dlsym(dnn, "cudnnCreate"), *b2 = dlsym(dnn, "curl_easy_init"),
		     *c = dlsym(dnn, "cuda_like_helper");
		ok(a && !strcmp(lib_of(a), base(getenv("NVS_FOREIGN_LIB"))),
		   "cudnnCreate untouched");
		ok(b2 && !strcmp(lib_of(b2), base(getenv("NVS_FOREIGN_LIB"))),
		   "curl_easy_init untouched");
		ok(c && !strcmp(lib_of(c), base(getenv("NVS_FOREIGN_LIB"))),
		   "cuda_like_helper untouched");
	} else {
		ok(0, "dlopen foreign library: %s", dlerror());
	}

	/* RTLD_NEXT from another preloaded library keeps its caller */
	void *(*next_lookup)(const char *) =
	    (void *(*)(const char *))dlsym(RTLD_DEFAULT, "nvs_next_lookup");
	if (next_lookup) {
		void *q = next_lookup("nvs_next_target");
		ok(q && strstr(lib_of(q), "libnexttarget"),
		   "dlsym(RTLD_NEXT) from a preloaded library resolves after that library (%s)",
		   lib_of(q));
		void *o = next_lookup("open");
		ok(o && strstr(lib_of(o), "libc"), "dlsym(RTLD_NEXT, open) -> libc (%s)",
		   lib_of(o));
		q = next_lookup("nvs_next_target");
		ok(q && strstr(lib_of(q), "libnexttarget"),
		   "repeated RTLD_NEXT lookups stay correct");
	} else {
		printf("# nvs_next_lookup not preloaded; RTLD_NEXT test skipped\n");
	}

	/* unknown newer variant of a guarded name: fail closed. The sim may
	 * not export one; NVS_UNKNOWN_VARIANT names a base that has one. */
	const char *uv = getenv("NVS_UNKNOWN_VARIANT");
	if (uv) {
		void *q = (void *)&st;
		r = gpa2(uv, &q, 13000, 0, NULL);
		ok(r == CUDA_ERROR_NOT_SUPPORTED && !q, "unknown newer variant of %s refused", uv);
	}

	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
