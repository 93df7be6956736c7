/*
 * Kernel durations in real time: stream, event and context synchronisation,
 * GPU serialisation across streams, capture and graph replay, the bound on
 * a stream's pending launches (NVSHARE_SIM_MAX_PENDING).
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "sim_api.h"

CUresult
cuStreamSynchronize_ptsz(CUstream hStream); /* exported; cuda.h declares it only per-thread */
#include "tap.h"

static CUfunction simk, plain;

static double ms_since(uint64_t t0)
{
	return (double)(nvshareSimNowNs() - t0) / 1e6;
}

static CUresult run(CUstream s, unsigned long long us)
{
	void *params[] = {&us, NULL, NULL};
	return cuLaunchKernel(simk, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

static int host_calls;
static void host_fn(void *p)
{
	host_calls += *(int *)p;
}

/* ---- the bound on pending launches ---- */

#define BURST 40
#define BURST_US 5000

struct burst {
	double loop_ms; /* host time of the launch loop */
	int pending;	/* of its kernels, incomplete when it returned */
	double sync_ms; /* until cuStreamSynchronize returned */
	int in_order;	/* each kernel ended >= 5 ms after the previous */
	float last_ms;	/* the last kernel's end, after an event before the first */
};

/* BURST x 5 ms kernels on an idle stream, an event recorded after each. */
static struct burst burst(CUstream s)
{
	struct burst b = {0};
	CUevent e0, ev[BURST];
	cuEventCreate(&e0, 0);
	for (int i = 0; i < BURST; i++)
		cuEventCreate(&ev[i], 0);
	cuEventRecord(e0, s);
	uint64_t t0 = nvshareSimNowNs();
	for (int i = 0; i < BURST; i++) {
		run(s, BURST_US);
		cuEventRecord(ev[i], s);
	}
	b.loop_ms = ms_since(t0);
	for (int i = 0; i < BURST; i++)
		b.pending += cuEventQuery(ev[i]) == CUDA_ERROR_NOT_READY;
	cuStreamSynchronize(s);
	b.sync_ms = ms_since(t0);
	b.in_order = 1;
	float prev = 0;
	for (int i = 0; i < BURST; i++) {
		float el = -1;
		if (cuEventElapsedTime_v2(&el, e0, ev[i]) != 0 ||
		    el - prev < BURST_US / 1000.0f - 0.01f)
			b.in_order = 0;
		prev = el;
		cuEventDestroy_v2(ev[i]);
	}
	b.last_ms = prev;
	cuEventDestroy_v2(e0);
	return b;
}

static void check_burst(const struct burst *b, const char *what)
{
	OK(b->in_order && b->last_ms >= BURST * BURST_US / 1000.0f - 0.01f &&
	       b->sync_ms >= BURST * BURST_US / 1000.0,
	   "%s: all %d kernels ran, in order (last ends %.1f ms after the first starts; sync %.1f "
	   "ms)",
	   what, BURST, b->last_ms, b->sync_ms);
}

/* What a process with NVSHARE_SIM_MAX_PENDING=8 measured (fork_pending). */
struct pending8 {
	int init_ok;
	struct burst b;
	double graph_loop_ms, graph_sync_ms; /* 12 launches of a 2 x 2 ms graph */
	double prefetch_loop_ms;	     /* 12 prefetches of 4.2 ms */
};

static void pending8_child(int fd)
{
	setenv("NVSHARE_SIM_MAX_PENDING", "8", 1);
	setenv("NVSHARE_SIM_H2D_GBPS", "0.5", 1); /* 2 MiB: 4.2 ms */
	setenv("NVSHARE_SIM_D2H_GBPS", "0.5", 1);
	unsetenv("NVSHARE_SIM_STATE_DIR"); /* a GPU of its own */
	struct pending8 r = {0};
	CUcontext ctx;
	CUmodule mod;
	CUstream s;
	CUgraph g;
	CUgraphExec ge;
	CUdeviceptr m;
	r.init_ok = cuInit(0) == 0 && cuCtxCreate_v4(&ctx, NULL, 0, 0) == 0 &&
		    cuModuleLoadData(&mod, "image") == 0 &&
		    cuModuleGetFunction(&simk, mod, NVSHARE_SIM_KERNEL_NAME) == 0 &&
		    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == 0;
	if (r.init_ok) {
		r.b = burst(s);

		/* A graph launch is one launch, however many nodes. */
		cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		run(s, 2000);
		run(s, 2000);
		r.init_ok =
		    cuStreamEndCapture(s, &g) == 0 && cuGraphInstantiateWithFlags(&ge, g, 0) == 0;
		uint64_t t0 = nvshareSimNowNs();
		for (int i = 0; i < 12 && r.init_ok; i++)
			r.init_ok = cuGraphLaunch(ge, s) == 0;
		r.graph_loop_ms = ms_since(t0);
		cuStreamSynchronize(s);
		r.graph_sync_ms = ms_since(t0);

		/* Prefetches queue on the stream too. */
		r.init_ok = r.init_ok && cuMemAllocManaged(&m, 2 << 20, CU_MEM_ATTACH_GLOBAL) == 0;
		CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
			      host = {.type = CU_MEM_LOCATION_TYPE_HOST};
		t0 = nvshareSimNowNs();
		for (int i = 0; i < 12 && r.init_ok; i++)
			r.init_ok =
			    cuMemPrefetchAsync_v2(m, 2 << 20, i % 2 ? host : gpu, 0, s) == 0;
		r.prefetch_loop_ms = ms_since(t0);
		cuStreamSynchronize(s);
	}
	ssize_t w = write(fd, &r, sizeof(r));
	_exit(w == (ssize_t)sizeof(r) ? 0 : 1);
}

/* Runs pending8_child in a fresh process (the bound is read once, at
 * initialisation) before this one initialises the driver. */
static int fork_pending8(struct pending8 *r)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		pending8_child(fds[1]);
	}
	close(fds[1]);
	ssize_t n = pid > 0 ? read(fds[0], r, sizeof(*r)) : -1;
	close(fds[0]);
	int st = 0;
	if (pid > 0)
		waitpid(pid, &st, 0);
	return n == (ssize_t)sizeof(*r) && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void check_pending8(void)
{
	struct pending8 r;
	int ok = fork_pending8(&r) == 0 && r.init_ok;
	OK(ok, "NVSHARE_SIM_MAX_PENDING=8: a process ran the bounded launches");
	if (!ok)
		return;
	double want = (BURST - 8) * BURST_US / 1000.0;
	OK(r.b.loop_ms >= want,
	   "max 8 pending: %d x 5 ms launches block, loop took %.1f ms (>= %.0f)", BURST,
	   r.b.loop_ms, want);
	OK(r.b.pending <= 8, "max 8 pending: %d kernels incomplete when the loop returned",
	   r.b.pending);
	check_burst(&r.b, "max 8 pending");
	OK(r.graph_loop_ms >= 16 && r.graph_sync_ms >= 48,
	   "max 8 pending: a graph launch is one launch; 12 of a 2 x 2 ms graph block from the 9th "
	   "(loop %.1f ms >= 16, all %.1f ms >= 48)",
	   r.graph_loop_ms, r.graph_sync_ms);
	OK(r.prefetch_loop_ms >= 16,
	   "max 8 pending: 12 prefetches of 2 MiB at 0.5 GB/s block (loop %.1f ms >= 16)",
	   r.prefetch_loop_ms);
}

int main(void)
{
	tap_private_state();
	unsetenv("NVSHARE_SIM_MAX_PENDING");
	check_pending8();
	setenv("NVSHARE_SIM_KERNEL_US", "3000", 1);
	unsetenv("NVSHARE_SIM_GPUS");
	unsetenv("CUDA_VISIBLE_DEVICES");
	CUcontext ctx;
	CUmodule mod;
	CUstream s1, s2;
	cuInit(0);
	cuCtxCreate_v4(&ctx, NULL, 0, 0);
	OK(cuModuleLoadData(&mod, "image") == 0 &&
	       cuModuleGetFunction(&simk, mod, NVSHARE_SIM_KERNEL_NAME) == 0 &&
	       cuModuleGetFunction(&plain, mod, "anything") == 0,
	   "module and functions");
	cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);

	struct nvshare_sim_stats k0, k1;
	nvshareSimGetProcStats(0, 0, &k0);
	uint64_t t0 = nvshareSimNowNs();
	for (int i = 0; i < 10; i++)
		run(s1, 2000);
	double launch_ms = ms_since(t0);
	/* Asynchrony is proven by the stream still being busy (the kernels take
	 * 20 ms); the time is only checked for a hang. */
	OK(cuStreamQuery(s1) == CUDA_ERROR_NOT_READY, "stream busy after 10 launches");
	OK(launch_ms < HANG_GUARD_MS, "10 launches return at once (%.2f ms)", launch_ms);
	cuStreamSynchronize(s1);
	double ms = ms_since(t0);
	OK(ms >= 20 && ms < 20 + HANG_GUARD_MS, "10 x 2 ms kernels: stream sync after %.1f ms", ms);
	OK(cuStreamQuery(s1) == CUDA_SUCCESS, "stream idle");
	/* The model's own account, exact whatever the machine's load. */
	nvshareSimGetProcStats(0, 0, &k1);
	OK(k1.kernels - k0.kernels == 10 && k1.kernel_busy_ns - k0.kernel_busy_ns == 20000000,
	   "the model ran 10 kernels for exactly 20 ms (%llu ns)",
	   (unsigned long long)(k1.kernel_busy_ns - k0.kernel_busy_ns));

	t0 = nvshareSimNowNs();
	cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL);
	cuStreamSynchronize(s1);
	ms = ms_since(t0);
	nvshareSimGetProcStats(0, 0, &k0);
	OK(ms >= 3 && ms < 3 + HANG_GUARD_MS && k0.kernel_busy_ns - k1.kernel_busy_ns == 3000000,
	   "default duration from NVSHARE_SIM_KERNEL_US=3000 (model %llu ns, waited %.1f ms)",
	   (unsigned long long)(k0.kernel_busy_ns - k1.kernel_busy_ns), ms);

	/* Two streams share one GPU: their kernels serialize. */
	t0 = nvshareSimNowNs();
	for (int i = 0; i < 5; i++) {
		run(s1, 2000);
		run(s2, 2000);
	}
	cuStreamSynchronize(s1);
	double ms1 = ms_since(t0);
	cuStreamSynchronize(s2);
	double ms2 = ms_since(t0);
	OK(ms1 >= 18 && ms2 >= 20 && ms2 < 20 + HANG_GUARD_MS,
	   "2 streams x 5 x 2 ms serialize (%.1f / %.1f ms)", ms1, ms2);

	/* Context sync covers every stream; events time the work. */
	CUevent e0, e1;
	cuEventCreate(&e0, 0);
	cuEventCreate(&e1, 0);
	uint64_t t_rec = nvshareSimNowNs();
	cuEventRecord(e0, s2);
	run(s2, 5000);
	cuEventRecord(e1, s2);
	OK(cuEventQuery(e1) == CUDA_ERROR_NOT_READY, "event not reached yet");
	t0 = nvshareSimNowNs();
	OK(cuCtxSynchronize() == CUDA_SUCCESS, "cuCtxSynchronize");
	ms = ms_since(t0);
	float el = 0;
	/* The events span the kernel (>= 5 ms) and nothing outside what was
	 * waited for (<= the wall time from before the first record to the
	 * sync's end: load lengthens both alike). */
	double span_ms = ms_since(t_rec);
	OK(cuEventQuery(e1) == CUDA_SUCCESS && cuEventElapsedTime_v2(&el, e0, e1) == 0 &&
	       el >= 4.999f && el <= span_ms,
	   "event elapsed %.3f ms for a 5 ms kernel (within %.2f ms waited)", el, span_ms);
	OK(ms >= 4 && ms < 5 + HANG_GUARD_MS, "context sync waited %.1f ms", ms);

	/* Cross-stream dependency through an event. */
	run(s1, 4000);
	cuEventRecord(e0, s1);
	cuStreamWaitEvent(s2, e0, 0);
	t0 = nvshareSimNowNs();
	cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, s2, NULL, NULL);
	cuStreamSynchronize(s2);
	ms = ms_since(t0);
	OK(ms >= 7, "stream waits for an event of another stream (%.1f ms)", ms);

	/* Legacy NULL stream and per-thread stream both work. */
	t0 = nvshareSimNowNs();
	OK(run(NULL, 2000) == 0 && run(CU_STREAM_PER_THREAD, 2000) == 0 &&
	       cuStreamSynchronize(NULL) == 0 && cuStreamSynchronize_ptsz(NULL) == 0,
	   "legacy and per-thread default streams");
	ms = ms_since(t0);
	OK(ms >= 4, "both default streams ran their kernels (%.1f ms)", ms);

	/* Host function runs after earlier work. */
	int one = 1;
	run(s1, 3000);
	t0 = nvshareSimNowNs();
	OK(cuLaunchHostFunc(s1, host_fn, &one) == 0 && host_calls == 1 && ms_since(t0) >= 2.5,
	   "host function ran after the kernel");

	/* Capture records instead of running; replay takes the recorded time. */
	struct nvshare_sim_stats a, b;
	nvshareSimGetStats(0, &a);
	CUstreamCaptureStatus cs;
	CUgraph g;
	CUgraphExec ge;
	OK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL) == 0 &&
	       cuStreamIsCapturing(s1, &cs) == 0 && cs == CU_STREAM_CAPTURE_STATUS_ACTIVE,
	   "capture begins");
	for (int i = 0; i < 4; i++)
		run(s1, 2500);
	cuLaunchHostFunc(s1, host_fn, &one);
	cuuint64_t id = 0;
	size_t nd = 9;
	OK(cuStreamGetCaptureInfo_v3(s1, &cs, &id, &g, NULL, NULL, &nd) == 0 &&
	       cs == CU_STREAM_CAPTURE_STATUS_ACTIVE && id > 0 && g != NULL,
	   "capture info v3");
	nvshareSimGetStats(0, &b);
	OK(b.kernels == a.kernels && host_calls == 1, "nothing ran during capture");
	OK(cuStreamEndCapture(s1, &g) == 0 && g, "capture ends with a graph");
	size_t nn = 0;
	OK(cuGraphGetNodes(g, NULL, &nn) == 0 && nn == 5, "graph has 5 nodes");
	OK(cuGraphInstantiateWithFlags(&ge, g, 0) == 0, "instantiate");
	t0 = nvshareSimNowNs();
	OK(cuGraphLaunch(ge, s1) == 0 && cuStreamSynchronize(s1) == 0, "graph launch");
	ms = ms_since(t0);
	nvshareSimGetStats(0, &b);
	OK(ms >= 10 && b.kernels == a.kernels + 4 && host_calls == 2,
	   "replay ran 4 x 2.5 ms + host node (%.1f ms)", ms);
	cuGraphExecDestroy(ge);
	cuGraphDestroy(g);

	/* A context-wide sync during capture breaks it (as on real GPUs). */
	cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
	run(s1, 1000);
	OK(cuCtxSynchronize() == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
	   "cuCtxSynchronize during capture fails");
	OK(cuStreamEndCapture(s1, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && g == NULL,
	   "capture invalidated");
	OK(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL) ==
	       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
	   "legacy stream cannot capture");

	/* Manually built graph with cuLaunchKernelEx-style params. */
	CUDA_KERNEL_NODE_PARAMS kp;
	memset(&kp, 0, sizeof(kp));
	unsigned long long us = 3000;
	void *params[] = {&us, NULL, NULL};
	kp.func = simk;
	kp.kernelParams = params;
	CUgraphNode node;
	cuGraphCreate(&g, 0);
	OK(cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp) == 0 &&
	       cuGraphInstantiateWithFlags(&ge, g, 0) == 0,
	   "add kernel node, instantiate");
	t0 = nvshareSimNowNs();
	CUlaunchConfig cfg = {.gridDimX = 1,
			      .gridDimY = 1,
			      .gridDimZ = 1,
			      .blockDimX = 1,
			      .blockDimY = 1,
			      .blockDimZ = 1,
			      .hStream = s2};
	cuGraphLaunch(ge, s2);
	cuLaunchKernelEx(&cfg, simk, params, NULL);
	cuStreamSynchronize(s2);
	ms = ms_since(t0);
	OK(ms >= 6, "graph node + cuLaunchKernelEx: %.1f ms", ms);

	/* The default bound, 1024 pending launches per stream. */
	CUstream s3;
	cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING);
	struct burst bu = burst(s3);
	OK(bu.loop_ms < HANG_GUARD_MS && bu.pending >= 30,
	   "default bound: %d x 5 ms launches return at once (%.2f ms, %d still pending)", BURST,
	   bu.loop_ms, bu.pending);
	check_burst(&bu, "default bound");
	t0 = nvshareSimNowNs();
	for (int i = 0; i < 1024 + 40; i++)
		run(s3, 1000);
	ms = ms_since(t0);
	cuStreamSynchronize(s3);
	OK(ms >= 40,
	   "default bound: launch 1025 waits for the first; 1064 x 1 ms launches took %.1f ms (>= "
	   "40)",
	   ms);
	cuStreamDestroy_v2(s3);

	nvshareSimGetStats(0, &b);
	OK(b.kernel_busy_ns > 60e6 && b.busy_until_ns <= nvshareSimNowNs(),
	   "busy time accounted (%.1f ms)", b.kernel_busy_ns / 1e6);
	cuGraphExecDestroy(ge);
	cuGraphDestroy(g);
	cuEventDestroy_v2(e0);
	cuEventDestroy_v2(e1);
	cuStreamDestroy_v2(s1);
	OK(cuStreamQuery(s1) == CUDA_ERROR_INVALID_HANDLE, "destroyed stream is invalid");
	TAP_DONE();
}
