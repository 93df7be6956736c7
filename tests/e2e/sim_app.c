/*
 * sim_app: a small CUDA driver-API application for the end-to-end tests and
 * the demo. It finds the driver the way libcudart does (dlopen libcuda.so.1,
 * dlsym cuGetProcAddress_v2, then every other entry point through the
 * cuGetProcAddress it returns), so under LD_PRELOAD=libnvshare.so every call
 * goes through nvshare. On the simulated GPU (tests/sim) the kernel
 * "nvshare_sim_kernel" runs for params[0] microseconds of real time.
 *
 *   sim_app [--name A] [--device 0] [--alloc 2Gi] [--touch] [--kernels 200]
 *           [--kernel-us 2000] [--sync-every 1] [--idle-after K --idle-ms MS]
 *           [--idle-after K --hold] [--report progress|summary]
 *           [--fork-child-kernels N] [--start-file FILE]
 *
 * --start-file: the first kernel waits until FILE exists (the memory is
 * allocated before): a test starts two applications together this way,
 * so that their runs overlap however late the machine started either.
 *
 * --hold: after kernel K the application stays, its context open, until it
 * is killed or its parent (the test) exits. Tests that need a GPU process
 * for as long as they look at it use this rather than a long --idle-ms: a
 * fixed lifetime runs out when the test's shell is not run for a while
 * (seen in a soak round: a 60 s idle ended under a stalled test).
 *
 * Output (stdout, one line each, t = CLOCK_MONOTONIC milliseconds, the clock
 * the simulated GPU and other clients share):
 *   START name=A pid=P t=...
 *   READY name=A t=...                          (--start-file: allocated, waiting)
 *   PROGRESS name=A kernel=i/N t=...          (--report progress)
 *   IDLE name=A from=T1 to=T2                  (--idle-after)
 *   DONE name=A kernels=N elapsed_ms=... result=ok|BAD t=...
 * Exit status 0 iff every call succeeded and the memory check passed.
 */
#include "tests/common/driver_lookup.h"
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *name = "app";
static int report_progress;

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemsetD32)(CUdeviceptr, unsigned, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	CUresult (*StreamSynchronize)(CUstream);
} cu;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what, int rc)
{
	printf("DONE name=%s result=FAILED(%s=%d) t=%.3f\n", name, what, rc, now_ms());
	fflush(stdout);
	exit(1);
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult rc_ = (call);                                                             \
		if (rc_ != CUDA_SUCCESS)                                                           \
			die(#call, (int)rc_);                                                      \
	} while (0)

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	uint64_t mul = 1;
	if (*end) {
		switch (*end) {
		case 'K':
		case 'k':
			mul = 1ull << 10;
			break;
		case 'M':
		case 'm':
			mul = 1ull << 20;
			break;
		case 'G':
		case 'g':
			mul = 1ull << 30;
			break;
		default:
			return -1;
		}
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B')
			end++;
		if (*end)
			return -1;
	}
	*out = (uint64_t)(v * (double)mul);
	return 0;
}

static void load_driver(void)
{
	nvs_test_prog = "sim_app";
	nvs_test_gpa_t gpa = nvs_test_load_driver(NULL);
	*(void **)&cu.Init = nvs_test_sym(gpa, "cuInit", 2000);
	*(void **)&cu.DeviceGet = nvs_test_sym(gpa, "cuDeviceGet", 2000);
	*(void **)&cu.PrimaryCtxRetain = nvs_test_sym(gpa, "cuDevicePrimaryCtxRetain", 7000);
	*(void **)&cu.CtxSetCurrent = nvs_test_sym(gpa, "cuCtxSetCurrent", 4000);
	*(void **)&cu.MemAlloc = nvs_test_sym(gpa, "cuMemAlloc", 3020);
	*(void **)&cu.MemFree = nvs_test_sym(gpa, "cuMemFree", 3020);
	*(void **)&cu.MemsetD32 = nvs_test_sym(gpa, "cuMemsetD32", 3020);
	*(void **)&cu.MemcpyDtoH = nvs_test_sym(gpa, "cuMemcpyDtoH", 3020);
	*(void **)&cu.ModuleLoadData = nvs_test_sym(gpa, "cuModuleLoadData", 2000);
	*(void **)&cu.ModuleGetFunction = nvs_test_sym(gpa, "cuModuleGetFunction", 2000);
	*(void **)&cu.LaunchKernel = nvs_test_sym(gpa, "cuLaunchKernel", 4000);
	*(void **)&cu.StreamSynchronize = nvs_test_sym(gpa, "cuStreamSynchronize", 2000);
}

struct run {
	const char *who;
	long kernels, idle_after, sync_every;
	unsigned long long kernel_us;
	uint64_t idle_ms;
	int hold;
	CUdeviceptr ptr;
	uint64_t bytes;
	int touch;
	CUfunction fn;
};

static void run_kernels(const struct run *r)
{
	unsigned long long us = r->kernel_us, nb = r->touch ? r->bytes : 0;
	CUdeviceptr p = r->touch ? r->ptr : 0;
	void *args[3] = {&us, &p, &nb};
	for (long k = 1; k <= r->kernels; k++) {
		CK(cu.LaunchKernel(r->fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
		if (k % r->sync_every == 0 || k == r->kernels) {
			CK(cu.StreamSynchronize(NULL));
			if (report_progress)
				printf("PROGRESS name=%s kernel=%ld/%ld t=%.3f\n", r->who, k,
				       r->kernels, now_ms());
		}
		if (r->idle_after > 0 && k == r->idle_after) {
			CK(cu.StreamSynchronize(NULL));
			fflush(stdout); /* what came before the idle is visible during it */
			if (r->hold)
				for (;;)
					pause(); /* until killed (or the parent's death signal) */
			double from = now_ms();
			struct timespec ts = {(time_t)(r->idle_ms / 1000),
					      (long)(r->idle_ms % 1000) * 1000000L};
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
			printf("IDLE name=%s from=%.3f to=%.3f\n", r->who, from, now_ms());
		}
		fflush(stdout);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sim_app [--name A] [--device N] [--alloc SIZE] [--touch] [--kernels N]\n"
		"               [--kernel-us US] [--sync-every K] [--idle-after K --idle-ms MS]\n"
		"               [--idle-after K --hold] [--report progress|summary]\n"
		"               [--fork-child-kernels N] [--start-file FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct run r = {.who = "app", .kernels = 100, .sync_every = 1, .kernel_us = 1000};
	int ordinal = 0;
	long fork_kernels = 0;
	const char *start_file = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(s) (!strcmp(a, s) && v && ++i)
		if (ARG("--name"))
			name = v;
		else if (ARG("--device"))
			ordinal = atoi(v);
		else if (ARG("--alloc")) {
			if (parse_size(v, &r.bytes))
				usage();
		} else if (!strcmp(a, "--touch"))
			r.touch = 1;
		else if (ARG("--kernels"))
			r.kernels = atol(v);
		else if (ARG("--kernel-us"))
			r.kernel_us = strtoull(v, NULL, 10);
		else if (ARG("--sync-every"))
			r.sync_every = atol(v) > 0 ? atol(v) : 1;
		else if (ARG("--idle-after"))
			r.idle_after = atol(v);
		else if (ARG("--idle-ms"))
			r.idle_ms = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--hold"))
			r.hold = 1;
		else if (ARG("--report"))
			report_progress = !strcmp(v, "progress");
		else if (ARG("--fork-child-kernels"))
			fork_kernels = atol(v);
		else if (ARG("--start-file"))
			start_file = v;
		else
			usage();
#undef ARG
	}
	r.who = name;
	if (r.hold && r.idle_after <= 0)
		usage();
	if (r.hold) {
		/* Not outliving the test (a test killed by its timeout's KILL
		 * runs no cleanup): TERM when the parent goes, and at once if
		 * it went before this was set. */
		pid_t parent = getppid();
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
			return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	double t0 = now_ms();
	printf("START name=%s pid=%d t=%.3f\n", name, (int)getpid(), t0);

	load_driver();
	CUdevice dev;
	CUcontext ctx;
	CK(cu.Init(0));
	CK(cu.DeviceGet(&dev, ordinal));
	CK(cu.PrimaryCtxRetain(&ctx, dev));
	CK(cu.CtxSetCurrent(ctx));
	uint32_t pattern = 0x5a000000u ^ (uint32_t)getpid();
	if (r.bytes) {
		r.bytes &= ~(uint64_t)3;
		CK(cu.MemAlloc(&r.ptr, r.bytes));
		CK(cu.MemsetD32(r.ptr, pattern, r.bytes / 4));
	}
	CUmodule mod;
	static const char image[] = "nvshare sim_app module";
	CK(cu.ModuleLoadData(&mod, image));
	CK(cu.ModuleGetFunction(&r.fn, mod, "nvshare_sim_kernel"));
	if (start_file) {
		printf("READY name=%s t=%.3f\n", name, now_ms());
		while (access(start_file, F_OK) != 0)
			usleep(5000);
	}

	pid_t child = -1;
	if (fork_kernels > 0) {
		fflush(stdout);
		child = fork();
		if (child < 0)
			die("fork", errno);
		if (child == 0) {
			/* The child keeps using the inherited context. */
			char cname[128];
			snprintf(cname, sizeof cname, "%s-child", name);
			name = strdup(cname);
			struct run cr = r;
			cr.who = name;
			cr.kernels = fork_kernels;
			cr.idle_after = 0;
			printf("START name=%s pid=%d t=%.3f\n", name, (int)getpid(), now_ms());
			run_kernels(&cr);
			printf("DONE name=%s kernels=%ld elapsed_ms=%.1f result=ok t=%.3f\n", name,
			       cr.kernels, now_ms() - t0, now_ms());
			fflush(stdout);
			exit(0);
		}
	}

	run_kernels(&r);

	const char *result = "ok";
	if (r.bytes) {
		/* The memory still holds what we wrote (check the last 1 MiB). */
		size_t n = r.bytes < (1u << 20) ? (size_t)r.bytes : (1u << 20);
		uint32_t *h = malloc(n);
		if (!h)
			die("malloc", ENOMEM);
		CK(cu.MemcpyDtoH(h, r.ptr + r.bytes - n, n));
		for (size_t i = 0; i < n / 4; i++)
			if (h[i] != pattern) {
				result = "BAD";
				break;
			}
		free(h);
		CK(cu.MemFree(r.ptr));
	}
	if (child > 0) {
		int st = 0;
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			result = "CHILD-FAILED";
	}
	printf("DONE name=%s kernels=%ld elapsed_ms=%.1f result=%s t=%.3f\n", name, r.kernels,
	       now_ms() - t0, result, now_ms());
	return strcmp(result, "ok") ? 1 : 0;
}
