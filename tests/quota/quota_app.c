/*
 * quota_app: the CUDA application of the quota tests (tests/quota). It finds
 * the driver as libcudart does (dlopen libcuda.so.1, then cuGetProcAddress),
 * so under LD_PRELOAD=libnvshare.so every call goes through nvshare.
 *
 * Compute mode (default): launches nvshare_sim_kernel (--kernel-us, default
 * 1000 us) back to back on the legacy stream, without synchronizing (or
 * every --sync-every kernels, as an application that reads results), for
 * --seconds (default 12), and every --sample-ms (default 100) prints
 *     S name=A t=<CLOCK_MONOTONIC ms> busy=<ns> kernels=<n>
 * where busy is this process's kernel time on the simulated GPU
 * (nvshareSimGetProcStats). The share over [t1, t2] is
 * (busy2 - busy1) / (t2 - t1). Prints "IDLE name=A t=<ms>" and stays
 * connected, doing nothing, for --idle-after seconds (default 0), then ends
 * with "DONE name=A". With --stop-file F it stops launching as soon as F
 * exists (checked at every sample), before --seconds if need be: the tests
 * end a run once they have measured, however slowly the machine went.
 *
 * Memory mode (--mem): reads commands from stdin, one per line, answering
 * each with one line:
 *     alloc [MiB] -> "ALLOC ok|fail used=<bytes>"   (64 MiB default, cuMemAlloc)
 *     free   -> "FREE ok used=<bytes>"         (the last allocation)
 *     info   -> "INFO free=<bytes> total=<bytes>"  (cuMemGetInfo)
 *     nvml   -> "NVML rc=<r> total=<bytes> used=<bytes> free=<bytes>"
 *               (nvmlDeviceGetMemoryInfo of device 0, looked up as
 *               monitoring tools do: dlopen + dlsym)
 *     quit
 *
 * quota_app --now prints CLOCK_MONOTONIC in ms (no CUDA).
 */
#include "tests/sim/sim_api.h"

#include "nvml_api.h"
#include "tests/common/driver_lookup.h"
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*procstats_t)(int, int, struct nvshare_sim_stats *);

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	CUresult (*CtxSynchronize)(void);
} cu;
static procstats_t proc_stats;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void load_driver(void)
{
	void *h;
	nvs_test_prog = "quota_app";
	nvs_test_gpa_t gpa = nvs_test_load_driver(&h);
	*(void **)&proc_stats = dlsym(h, "nvshareSimGetProcStats");
	if (!proc_stats) {
		fprintf(stderr, "quota_app: needs the simulated libcuda.so.1 (tests/sim)\n");
		exit(2);
	}
	*(void **)&cu.Init = nvs_test_sym(gpa, "cuInit", 2000);
	*(void **)&cu.DeviceGet = nvs_test_sym(gpa, "cuDeviceGet", 2000);
	*(void **)&cu.PrimaryCtxRetain = nvs_test_sym(gpa, "cuDevicePrimaryCtxRetain", 7000);
	*(void **)&cu.CtxSetCurrent = nvs_test_sym(gpa, "cuCtxSetCurrent", 4000);
	*(void **)&cu.MemAlloc = nvs_test_sym(gpa, "cuMemAlloc", 3020);
	*(void **)&cu.MemFree = nvs_test_sym(gpa, "cuMemFree", 3020);
	*(void **)&cu.MemGetInfo = nvs_test_sym(gpa, "cuMemGetInfo", 3020);
	*(void **)&cu.ModuleLoadData = nvs_test_sym(gpa, "cuModuleLoadData", 2000);
	*(void **)&cu.ModuleGetFunction = nvs_test_sym(gpa, "cuModuleGetFunction", 2000);
	*(void **)&cu.LaunchKernel = nvs_test_sym(gpa, "cuLaunchKernel", 4000);
	*(void **)&cu.CtxSynchronize = nvs_test_sym(gpa, "cuCtxSynchronize", 2000);
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult rc_ = (call);                                                             \
		if (rc_ != CUDA_SUCCESS) {                                                         \
			printf("FAILED %s = %d\n", #call, (int)rc_);                               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static const char *app_name = "app";
static atomic_long launched;
static atomic_int finished;
static atomic_int stop_asked;
static const char *stop_file;
static double sample_every_ms = 100;

static void sample(const char *name, long kernels)
{
	struct nvshare_sim_stats st;
	memset(&st, 0, sizeof st);
	proc_stats(0, 0, &st);
	printf("S name=%s t=%.3f busy=%llu kernels=%ld\n", name, now_ms(),
	       (unsigned long long)st.kernel_busy_ns, kernels);
	fflush(stdout);
}

/* Samples on its own thread: the launching thread blocks while throttled. */
static void *sampler(void *arg)
{
	(void)arg;
	double next = now_ms();
	while (!atomic_load(&finished)) {
		sample(app_name, atomic_load(&launched));
		if (stop_file && access(stop_file, F_OK) == 0)
			atomic_store(&stop_asked, 1);
		next += sample_every_ms;
		double d = next - now_ms();
		if (d > 0) {
			struct timespec ts = {(time_t)(d / 1e3),
					      (long)((d - (double)(long)(d / 1e3) * 1e3) * 1e6)};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static void nvml_info(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	nvs_pfn_nvmlInit_v2 init = h ? (nvs_pfn_nvmlInit_v2)dlsym(h, "nvmlInit_v2") : NULL;
	nvs_pfn_nvmlDeviceGetHandleByIndex_v2 byidx =
	    h ? (nvs_pfn_nvmlDeviceGetHandleByIndex_v2)dlsym(h, "nvmlDeviceGetHandleByIndex_v2")
	      : NULL;
	nvs_pfn_nvmlDeviceGetMemoryInfo mi =
	    h ? (nvs_pfn_nvmlDeviceGetMemoryInfo)dlsym(h, "nvmlDeviceGetMemoryInfo") : NULL;
	nvmlDevice_t dev;
	nvmlMemory_t m = {0};
	int r = -1;
	if (init && byidx && mi && !init() && !byidx(0, &dev))
		r = (int)mi(dev, &m);
	printf("NVML rc=%d total=%llu used=%llu free=%llu\n", r, m.total, m.used, m.free);
}

static int mem_mode(void)
{
	enum { MAXA = 256 };
	CUdeviceptr a[MAXA];
	size_t sz[MAXA];
	int n = 0;
	unsigned long long used = 0;
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "alloc", 5)) {
			unsigned long mib = strtoul(line + 5, NULL, 10);
			size_t chunk = (size_t)(mib ? mib : 64) << 20;
			int ok = n < MAXA && cu.MemAlloc(&a[n], chunk) == CUDA_SUCCESS;
			if (ok) {
				sz[n++] = chunk;
				used += chunk;
			}
			printf("ALLOC %s used=%llu\n", ok ? "ok" : "fail", used);
		} else if (!strncmp(line, "free", 4)) {
			int ok = n > 0 && cu.MemFree(a[n - 1]) == CUDA_SUCCESS;
			if (ok)
				used -= sz[--n];
			printf("FREE %s used=%llu\n", ok ? "ok" : "fail", used);
		} else if (!strncmp(line, "info", 4)) {
			size_t fr = 0, tot = 0;
			CUresult r = cu.MemGetInfo(&fr, &tot);
			printf("INFO rc=%d free=%zu total=%zu\n", (int)r, fr, tot);
		} else if (!strncmp(line, "nvml", 4)) {
			nvml_info();
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
		fflush(stdout);
	}
	while (n > 0)
		cu.MemFree(a[--n]);
	printf("DONE mem\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = "app";
	double seconds = 12;
	unsigned long long us = 1000;
	double sample_ms = 100;
	int mem = 0;
	long sync_every = 0;
	double idle_after = 0;
	if (argc == 2 && !strcmp(argv[1], "--now")) {
		/* The tests' clock (CLOCK_MONOTONIC ms), to align with the
		 * scheduler's windows. */
		printf("%.3f\n", now_ms());
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--name") && v)
			name = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && v)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--kernel-us") && v)
			us = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--sample-ms") && v)
			sample_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--sync-every") && v)
			sync_every = atol(argv[++i]);
		else if (!strcmp(argv[i], "--idle-after") && v)
			idle_after = atof(argv[++i]);
		else if (!strcmp(argv[i], "--stop-file") && v)
			stop_file = argv[++i];
		else if (!strcmp(argv[i], "--mem"))
			mem = 1;
		else {
			fprintf(stderr,
				"usage: quota_app [--name A] [--seconds S] [--kernel-us US] "
				"[--sample-ms MS] [--sync-every K] [--idle-after S] "
				"[--stop-file F] | --mem\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	load_driver();
	CUdevice dev;
	CUcontext ctx;
	CK(cu.Init(0));
	CK(cu.DeviceGet(&dev, 0));
	CK(cu.PrimaryCtxRetain(&ctx, dev));
	CK(cu.CtxSetCurrent(ctx));
	printf("START name=%s pid=%d t=%.3f\n", name, (int)getpid(), now_ms());
	if (mem)
		return mem_mode();

	CUmodule mod;
	static const char image[] = "nvshare quota_app module";
	CK(cu.ModuleLoadData(&mod, image));
	CUfunction fn;
	CK(cu.ModuleGetFunction(&fn, mod, NVSHARE_SIM_KERNEL_NAME));
	void *args[3] = {&us, NULL, NULL};
	app_name = name;
	sample_every_ms = sample_ms;
	pthread_t th;
	if (pthread_create(&th, NULL, sampler, NULL)) {
		printf("FAILED pthread_create\n");
		return 1;
	}
	double t0 = now_ms();
	long k = 0;
	while (now_ms() - t0 < seconds * 1e3 && !atomic_load(&stop_asked)) {
		CK(cu.LaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
		atomic_store(&launched, ++k);
		if (sync_every > 0 && k % sync_every == 0)
			CK(cu.CtxSynchronize());
	}
	atomic_store(&finished, 1);
	pthread_join(th, NULL);
	CK(cu.CtxSynchronize());
	sample(name, k);
	if (idle_after > 0) {
		/* Connected but idle: the scheduler must stop counting it. */
		printf("IDLE name=%s t=%.3f\n", name, now_ms());
		struct timespec ts = {(time_t)idle_after,
				      (long)((idle_after - (double)(time_t)idle_after) * 1e9)};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	printf("DONE name=%s kernels=%ld\n", name, k);
	return 0;
}
