/*
 * swap_app: a driver-API job for the swap tests (tests/swap), run under
 * LD_PRELOAD=libnvshare.so on the simulated GPU. It allocates several ranges
 * with cuMemAlloc (converted to managed memory by nvshare), fills each with
 * its own pattern, then runs steps of one kernel per range that touches the
 * whole range, and finally checks every byte pattern.
 *
 *   swap_app --name A --ranges 16Mi,64Mi,256Mi --steps 40 --kernel-us 2000
 *            [--linger-ms MS] [--pause-after STEPS --pause-ms MS] [--start-file F]
 *            [--end-file F] [--free-at-end] [--pause-file F]
 *            [--capture-alloc SIZE] [--capture-free]
 *   swap_app --prefetch-log      print the simulated GPU's prefetch log
 *
 * --start-file F: after allocating and filling, print "READY name=A" and
 * wait until F exists before the first step (tests start two jobs'
 * steps together whatever the machine's load). After the first step,
 * "RUNNING name=A" (it got the GPU).
 * --end-file F: after DONE, stay connected (memory held) until F exists, so
 * a test can read the scheduler's per-client view first; --linger-ms
 * without it sleeps that long instead. --free-at-end frees the ranges
 * right after DONE (print "FREED name=A"), before that wait: a worker
 * process that finished a job and lives on.
 * --pause-after/--pause-ms: after that many steps, print "PAUSE name=A" and
 * sleep (memory held, no GPU work: an idle client), then go on.
 * --pause-file F: with --pause-after, pause until F exists (after
 * --pause-ms, if given): the test decides when the pause ends.
 *
 * --capture-alloc SIZE: after the steps, capture one step into a CUDA graph
 * in global mode on a stream of its own and, during the capture, allocate
 * SIZE more as PyTorch's graph pool does (cuMemAlloc in relaxed mode), then
 * wait (10 s at most) until this process's pinned host memory grew (nvshare's
 * staging follows the allocations, pinned by its own thread while the
 * capture is under way), end the capture and replay it:
 *   CAPTURE name=A result=ok|rc=N pinned_before=B pinned_after=B
 * --capture-free: after the steps, free the first range while a capture in
 * global mode is under way on a stream of its own, which CUDA refuses
 * (a free synchronizes); the range lives on and its data is checked:
 *   CAPFREE name=A rc=N        (900: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
 *
 * Output: one DONE line, with this process's simulated-GPU counters:
 *   DONE name=A result=ok|BAD fault_bytes=N h2d_bytes=N d2h_bytes=N evicted_bytes=N
 *        discard_bytes=N stray=N elapsed_ms=T
 * --prefetch-log prints "PF seq pid dst ptr bytes moved start_ns end_ns".
 */
#include <cuda.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/sim/sim_api.h"

#define MAXR 8

static const char *name = "app";

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult rc_ = (call);                                                             \
		if (rc_ != CUDA_SUCCESS) {                                                         \
			printf("DONE name=%s result=FAILED(%s=%d)\n", name, #call, (int)rc_);      \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static uint64_t parse_size(const char *s)
{
	char *e;
	double v = strtod(s, &e);
	uint64_t m = 1;
	if (*e == 'K' || *e == 'k')
		m = 1ull << 10;
	else if (*e == 'M' || *e == 'm')
		m = 1ull << 20;
	else if (*e == 'G' || *e == 'g')
		m = 1ull << 30;
	return (uint64_t)(v * (double)m);
}

static int print_log(void)
{
	static struct nvshare_sim_prefetch r[1024];
	int n = nvshareSimGetPrefetchLog(r, 1024);
	for (int i = 0; i < n; i++)
		printf("PF %llu %d %d 0x%llx %llu %llu %llu %llu\n", (unsigned long long)r[i].seq,
		       r[i].pid, r[i].dst, (unsigned long long)r[i].ptr,
		       (unsigned long long)r[i].bytes, (unsigned long long)r[i].moved,
		       (unsigned long long)r[i].start_ns, (unsigned long long)r[i].end_ns);
	return 0;
}

static uint64_t pinned_now(void)
{
	struct nvshare_sim_stats st;
	memset(&st, 0, sizeof st);
	nvshareSimGetProcStats(0, 0, &st);
	return st.host_pinned_bytes;
}

static void sleep_ms(long ms);

/* --capture-alloc (header). */
static void capture_alloc(CUfunction fn, CUdeviceptr q, uint64_t n, uint64_t extra)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint64_t before = pinned_now(), after = before;
	unsigned long long us = 1000;
	void *args[3] = {&us, &q, &n};
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	CK(cuThreadExchangeStreamCaptureMode(&m));
	CUdeviceptr more;
	CK(cuMemAlloc(&more, extra));
	CK(cuThreadExchangeStreamCaptureMode(&m));
	for (int i = 0; i < 1000 && (after = pinned_now()) <= before; i++)
		sleep_ms(10);
	CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	CUgraph g = NULL;
	CUresult r = cuStreamEndCapture(s, &g);
	if (r == CUDA_SUCCESS) {
		CUgraphExec ge;
		CK(cuGraphInstantiateWithFlags(&ge, g, 0));
		CK(cuGraphLaunch(ge, s));
		CK(cuStreamSynchronize(s));
		printf("CAPTURE name=%s result=ok pinned_before=%llu pinned_after=%llu\n", name,
		       (unsigned long long)before, (unsigned long long)after);
	} else {
		printf("CAPTURE name=%s result=rc=%d pinned_before=%llu pinned_after=%llu\n", name,
		       (int)r, (unsigned long long)before, (unsigned long long)after);
	}
	CK(cuMemFree(more));
}

/* --capture-free (header). */
static void capture_free(CUdeviceptr q)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CUresult r = cuMemFree(q);
	CUgraph g = NULL;
	(void)cuStreamEndCapture(s, &g); /* invalidated by the refused free */
	if (g)
		CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s));
	printf("CAPFREE name=%s rc=%d\n", name, (int)r);
}

static void sleep_ms(long ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	uint64_t sizes[MAXR];
	int nr = 0;
	long steps = 20, linger_ms = 0, pause_after = -1, pause_ms = 0;
	int free_at_end = 0, cap_free = 0;
	const char *start_file = NULL, *end_file = NULL, *pause_file = NULL;
	unsigned long long kus = 1000;
	uint64_t capture_extra = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(a, "--prefetch-log"))
			return print_log();
		else if (!strcmp(a, "--name") && ++i)
			name = v;
		else if (!strcmp(a, "--steps") && ++i)
			steps = atol(v);
		else if (!strcmp(a, "--kernel-us") && ++i)
			kus = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--free-at-end"))
			free_at_end = 1;
		else if (!strcmp(a, "--linger-ms") && ++i)
			linger_ms = atol(v);
		else if (!strcmp(a, "--pause-after") && ++i)
			pause_after = atol(v);
		else if (!strcmp(a, "--pause-ms") && ++i)
			pause_ms = atol(v);
		else if (!strcmp(a, "--start-file") && ++i)
			start_file = v;
		else if (!strcmp(a, "--end-file") && ++i)
			end_file = v;
		else if (!strcmp(a, "--pause-file") && ++i)
			pause_file = v;
		else if (!strcmp(a, "--capture-alloc") && ++i)
			capture_extra = parse_size(v);
		else if (!strcmp(a, "--capture-free"))
			cap_free = 1;
		else if (!strcmp(a, "--ranges") && ++i) {
			char *d = strdup(v), *save = NULL;
			for (char *t = strtok_r(d, ",", &save); t && nr < MAXR;
			     t = strtok_r(NULL, ",", &save))
				sizes[nr++] = parse_size(t) & ~(uint64_t)3;
			free(d);
		} else {
			fprintf(stderr, "swap_app: bad argument %s\n", a);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	double t0 = now_ms();
	CUdevice dev;
	CUcontext ctx;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CUmodule mod;
	CUfunction fn;
	CK(cuModuleLoadData(&mod, "swap_app module"));
	CK(cuModuleGetFunction(&fn, mod, NVSHARE_SIM_KERNEL_NAME));
	CUdeviceptr p[MAXR];
	uint32_t pat[MAXR];
	for (int r = 0; r < nr; r++) {
		CK(cuMemAlloc(&p[r], sizes[r]));
		pat[r] = 0xa5000000u ^ ((uint32_t)getpid() << 4) ^ (uint32_t)r;
		CK(cuMemsetD32(p[r], pat[r], sizes[r] / 4));
	}
	if (start_file) {
		printf("READY name=%s t=%.3f\n", name, now_ms());
		while (access(start_file, F_OK) != 0)
			sleep_ms(10);
	}
	for (long s = 0; s < steps; s++) {
		if (s == pause_after) {
			printf("PAUSE name=%s t=%.3f\n", name, now_ms());
			sleep_ms(pause_ms);
			while (pause_file && access(pause_file, F_OK) != 0)
				sleep_ms(10);
		}
		for (int r = 0; r < nr; r++) {
			unsigned long long us = kus, n = sizes[r];
			CUdeviceptr q = p[r];
			void *args[3] = {&us, &q, &n};
			CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
		}
		CK(cuStreamSynchronize(NULL));
		if (s == 0)
			printf("RUNNING name=%s t=%.3f\n", name, now_ms());
	}
	if (capture_extra && nr)
		capture_alloc(fn, p[0], sizes[0], capture_extra);
	if (cap_free && nr)
		capture_free(p[0]);
	/* Every byte of every range still holds its pattern. */
	const char *res = "ok";
	for (int r = 0; r < nr && !strcmp(res, "ok"); r++) {
		uint32_t *h = malloc(sizes[r]);
		if (!h)
			return 3;
		CK(cuMemcpyDtoH(h, p[r], sizes[r]));
		for (uint64_t i = 0; i < sizes[r] / 4; i++)
			if (h[i] != pat[r]) {
				res = "BAD";
				break;
			}
		free(h);
	}
	struct nvshare_sim_stats st;
	memset(&st, 0, sizeof st);
	nvshareSimGetProcStats(0, 0, &st);
	printf("DONE name=%s result=%s fault_bytes=%llu h2d_bytes=%llu d2h_bytes=%llu "
	       "evicted_bytes=%llu discard_bytes=%llu stray=%llu elapsed_ms=%.1f t=%.3f\n",
	       name, res, (unsigned long long)st.fault_bytes,
	       (unsigned long long)st.prefetch_h2d_bytes, (unsigned long long)st.prefetch_d2h_bytes,
	       (unsigned long long)st.evicted_bytes, (unsigned long long)st.discard_bytes,
	       (unsigned long long)st.stray_accesses, now_ms() - t0, now_ms());
	if (free_at_end) {
		for (int r = 0; r < nr; r++)
			CK(cuMemFree(p[r]));
		printf("FREED name=%s t=%.3f\n", name, now_ms());
		nr = 0;
	}
	if (end_file)
		while (access(end_file, F_OK) != 0)
			sleep_ms(10);
	else
		sleep_ms(linger_ms);
	for (int r = 0; r < nr; r++)
		CK(cuMemFree(p[r]));
	return strcmp(res, "ok") ? 1 : 0;
}
